package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
)

// NewGroup returns this rank's view of a group of ranks: a *Rank whose world
// is members (world ranks, ascending, this rank among them), numbered 0..
// len(members)-1 in that order. Plans made on it run their collectives
// among the members only, with flags, epochs and workspace of their own, so
// two groups never share a flag, also when their members overlap.
//
// The group's heap is a reservation of heapBytes on the world's heap,
// carved up by the group's own allocator: the members allocate in step with
// each other, not with the rest of the world. Making the reservation is
// collective over the world: every rank of the world calls NewGroup, in the
// same order relative to its other heap allocations, with the same
// heapBytes, each passing the members of its own group (a partition of the
// world, or several calls for groups that overlap). Every rank fails when
// the lists disagree. Host barriers of the group meet its members only
// (in a multi-process world over a TCP rendezvous on 127.0.0.1 that the
// group's first member opens: the ranks of a world share a node).
//
// When the world's ranks share GPUs (Options.ShareGPUs), a group must hold
// every rank of each GPU it holds one of: otherwise every rank gets a
// *SharedGPUGroupError, which says why.
//
// The group shares the rank's device, stream and error record. Close it
// with Close, on every rank of the world (it frees the reservation).
func (r *Rank) NewGroup(members []int, heapBytes int64) (*Rank, error) {
	if r.parent != nil {
		return nil, errors.New("NewGroup: make groups from a rank of the world, not from a group")
	}
	if err := r.usable("NewGroup"); err != nil {
		return nil, err
	}
	local := validGroup(r.rank, r.world, members, heapBytes)
	// The first member of a multi-process group listens before the ranks
	// exchange their lists, so its port can travel with them.
	var ln net.Listener
	port := 0
	if local == nil && r.local == nil && len(members) > 1 && members[0] == r.rank {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			local = &WorldError{Rank: r.rank, Op: "new group", Peer: -1, Msg: "cannot open the group's rendezvous on 127.0.0.1", Err: err}
		} else {
			defer ln.Close() // closed by the rendezvous once joined; this covers the failures before
			port = ln.Addr().(*net.TCPAddr).Port
		}
	}
	msg := binary.LittleEndian.AppendUint64(nil, uint64(heapBytes))
	msg = binary.LittleEndian.AppendUint32(msg, uint32(port))
	msg = binary.LittleEndian.AppendUint32(msg, uint32(r.dev.Ordinal()))
	for _, m := range members {
		msg = binary.LittleEndian.AppendUint32(msg, uint32(m))
	}
	parts, err := r.exchange("new group", local, msg)
	if err != nil {
		return nil, err
	}
	lists, err := agreeGroups(r.rank, parts, heapBytes)
	if err != nil {
		return nil, err
	}
	if r.perGPU > 1 {
		gpus := make([]int, len(parts))
		for p, b := range parts {
			gpus[p] = int(binary.LittleEndian.Uint32(b[12:]))
		}
		if err := splitsSharedGPU(r.rank, lists, gpus); err != nil {
			return nil, err
		}
	}
	groupPort := int(binary.LittleEndian.Uint32(parts[members[0]][8:]))
	// Every rank reserves, so the world's heaps stay equal.
	res, err := r.heap.alloc(heapBytes, kindGroup)
	if err != nil {
		return nil, err
	}
	base := r.heap.base + gpu.DevicePtr(res.off)
	g := &Rank{rank: slices.Index(members, r.rank), world: len(members), opts: r.opts, dev: r.dev,
		stream: r.stream, control: r.control, errHost: r.errHost, errDev: r.errDev, one: r.one, kernels: r.kernels, graphs: r.graphs, seens: r.seens, lanes: r.lanes, local: r.local, perGPU: r.perGPU, parent: r, reserved: base}
	bases := make([]gpu.DevicePtr, len(members))
	for i, m := range members {
		bases[i] = r.heap.Peer(base, m)
	}
	if g.heap, err = newHeap(g.rank, r.dev, base, heapBytes, bases); err == nil {
		g.heap.parent = r.heap
		// The reservation held other memory before: the control block
		// starts zeroed, as a world's heap does, before any member launches.
		if err = r.dev.MemsetD8Async(base, 0, core.ControlBytes, r.stream); err == nil {
			err = r.dev.StreamSynchronize(r.stream)
		}
		if err != nil {
			err = platformErr("zeroing the group's control block", err)
		}
	}
	if err != nil {
		r.heap.free(base, 0, kindGroup)
		return nil, err
	}
	g.setBases(bases)
	switch {
	case r.local != nil:
		g.groupKey = groupKey(r.groups, members)
		g.group = r.local.subgroup(g.groupKey, len(members)).endpoint(g.rank)
	case len(members) == 1:
		g.group = newLocalGroup(1, r.opts.RendezvousTimeout).endpoint(0)
	default:
		cfg := ProcessConfig{Rank: g.rank, WorldSize: len(members), MasterAddr: "127.0.0.1", MasterPort: groupPort}
		g.group, err = dialGroupOn(cfg, ln, r.opts.RendezvousTimeout, r.opts.RendezvousTimeout)
	}
	r.groups++
	if err != nil {
		r.heap.free(base, 0, kindGroup)
		return nil, err
	}
	return g, nil
}

// Parent is the world's rank this group rank belongs to, or nil for a rank
// of the world itself.
func (r *Rank) Parent() *Rank { return r.parent }

// closeGroup leaves a group made by NewGroup: it waits for the members, then
// frees the group's reservation on the world's heap and its rendezvous. It
// refuses (*InUseError) while a live graph holds the group's tensors.
func (r *Rank) closeGroup() error {
	if r.closed.Load() {
		return nil
	}
	if err := r.usable("close of a group"); err != nil {
		return err // the world's release freed the reservation with its heap
	}
	if r.reserved != 0 {
		off, _ := r.parent.heap.Offset(r.reserved)
		if n := r.heap.pinned(0, true) + r.parent.heap.pinned(off, false); n > 0 {
			return &InUseError{What: fmt.Sprintf("this rank's group of %d ranks", r.world), By: graphsUsing(n)}
		}
	}
	_ = r.dev.StreamSynchronize(r.stream)
	_ = r.group.Barrier() // a failed group cannot be waited for; free anyway
	var err error
	if r.reserved != 0 {
		err = r.parent.heap.free(r.reserved, 0, kindGroup)
		r.reserved = 0
		r.heap.close()
	}
	if r.groupKey != "" {
		r.local.dropGroup(r.groupKey)
	}
	r.closed.Store(true)
	return errors.Join(err, r.dropSeen(), r.group.Close())
}

// validGroup checks one rank's own arguments to NewGroup.
func validGroup(rank, world int, members []int, heapBytes int64) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("NewGroup on rank %d: %s", rank, fmt.Sprintf(format, a...))
	}
	switch {
	case heapBytes <= 0:
		return bad("heapBytes = %d; reserve some heap for the group's plans and tensors", heapBytes)
	case len(members) == 0:
		return bad("no members; list the world ranks of this rank's group, this rank included")
	case !slices.Contains(members, rank):
		return bad("members %v leave this rank out; every rank passes its own group", members)
	}
	for i, m := range members {
		if m < 0 || m >= world {
			return bad("member %d is not a rank of this %d-rank world", m, world)
		}
		if i > 0 && m <= members[i-1] {
			return bad("members %v are not in ascending order without repeats", members)
		}
	}
	return nil
}

// groupHeader is the bytes of a NewGroup message before its members: heap
// bytes, the group's rendezvous port, the rank's GPU ordinal.
const groupHeader = 16

// agreeGroups checks what every rank passed: one heap size, and every
// member of a rank's group passing that same group. It returns every
// rank's group.
func agreeGroups(rank int, parts [][]byte, heapBytes int64) ([][]int, error) {
	lists := make([][]int, len(parts))
	for p, b := range parts {
		if len(b) < groupHeader || (len(b)-groupHeader)%4 != 0 {
			return nil, &WorldError{Rank: rank, Op: "new group", Peer: p, Msg: "sent a malformed group"}
		}
		if got := int64(binary.LittleEndian.Uint64(b)); got != heapBytes {
			return nil, &WorldError{Rank: rank, Op: "new group", Peer: p, Msg: fmt.Sprintf(
				"reserves %d heap bytes for its group, this rank %d: every rank must pass the same heapBytes", got, heapBytes)}
		}
		for i := groupHeader; i < len(b); i += 4 {
			lists[p] = append(lists[p], int(binary.LittleEndian.Uint32(b[i:])))
		}
	}
	for p, l := range lists {
		for _, m := range l {
			if !slices.Equal(lists[m], l) { // every list passed validGroup: members are ranks
				return nil, &WorldError{Rank: rank, Op: "new group", Peer: p, Msg: fmt.Sprintf(
					"names group %v, but its member %d passed %v: every member of a group must pass the same list", l, m, lists[m])}
			}
		}
	}
	return lists, nil
}

// splitsSharedGPU is the rule for groups in a world whose ranks share GPUs
// (see SharedGPUGroupError): every group (lists[p] is rank p's) holds all
// the ranks of each GPU it holds one of, gpus[q] being rank q's GPU. Every
// rank checks every group, so all of them refuse alike.
func splitsSharedGPU(rank int, lists [][]int, gpus []int) error {
	for _, l := range lists {
		for _, m := range l {
			var on []int
			for q, g := range gpus {
				if g == gpus[m] {
					on = append(on, q)
				}
			}
			for _, q := range on {
				if !slices.Contains(l, q) {
					return &SharedGPUGroupError{Rank: rank, Members: slices.Clone(l), GPU: gpus[m], OnGPU: on}
				}
			}
		}
	}
	return nil
}

// groupKey names the n-th group made in an in-process world: its members
// find the same rendezvous under it.
func groupKey(n int, members []int) string {
	s := make([]string, len(members))
	for i, m := range members {
		s[i] = strconv.Itoa(m)
	}
	return strconv.Itoa(n) + ":" + strings.Join(s, ",")
}

// exchange is one rendezvous of the world that carries each rank's payload
// or its local error: every rank gets every payload, or an error when any
// rank failed.
func (r *Rank) exchange(op string, localErr error, payload []byte) ([][]byte, error) {
	msg := append([]byte{1}, payload...)
	if localErr != nil {
		msg = append([]byte{0}, localErr.Error()...)
	}
	parts, err := r.group.AllGather(msg)
	switch {
	case localErr != nil:
		return nil, localErr
	case err != nil:
		return nil, err
	}
	out := make([][]byte, len(parts))
	for p, b := range parts {
		if len(b) == 0 || b[0] == 0 {
			return nil, &WorldError{Rank: r.rank, Op: op, Peer: p, Msg: "failed: " + peerText(b[min(1, len(b)):])}
		}
		out[p] = b[1:]
	}
	return out, nil
}
