package bench

import (
	"errors"

	"github.com/irisgen/irisgen/internal/nccl"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
)

// known is what the benchmark knows about a collective by its name, as
// data: nccl-tests' bus bandwidth rule, the NCCL call that is its
// baseline, whether baselines.py times it through torch, and its variants
// that are slow by design. A collective not in knownCollectives (one of a
// downstream package, a new one of the catalogue) is benched by the rules
// of its table alone: the size sweep, no baseline, a bus bandwidth of 0.
type known struct {
	bus   busRule
	nccl  *ncclCall // nil: NCCL has no such call
	torch bool      // baselines.py has a torch baseline of it
	// slow maps a variant whose algorithm is not meant for large messages
	// (element atomics, lock-protected read-modify-write) to the largest
	// size it is timed at.
	slow map[string]int64
}

// busRule is nccl-tests' ratio of bus bandwidth to algorithm bandwidth.
type busRule int

const (
	busUnknown   busRule = iota // 0: no nccl-tests rule
	busAllReduce                // 2(w-1)/w
	busShared                   // (w-1)/w: every rank's share crosses the links once
	busOne                      // 1
)

var knownCollectives = map[string]known{
	"all_reduce":         {bus: busAllReduce, nccl: ncclAllReduce, torch: true, slow: map[string]int64{"atomic": 4 << 20, "spinlock": 4 << 20}},
	"all_reduce_rmsnorm": {bus: busAllReduce},
	"all_gather":         {bus: busShared, nccl: ncclAllGather, torch: true},
	"reduce_scatter":     {bus: busShared, nccl: ncclReduceScatter, torch: true},
	"all_to_all":         {bus: busShared, nccl: ncclAllToAll, torch: true},
	"gather":             {bus: busShared, nccl: ncclGather},
	"scatter":            {bus: busShared, nccl: ncclScatter},
	"broadcast":          {bus: busOne, nccl: ncclBroadcast},
	"reduce":             {bus: busOne, nccl: ncclReduce},
	"send_recv":          {bus: busOne, nccl: ncclSendRecv},
	"shift":              {bus: busOne, nccl: ncclShift},
}

// slowLimit is the largest size e is timed at (0: any).
func slowLimit(e irisimpl.Entry) int64 { return knownCollectives[e.Collective].slow[e.Variant] }

// SlowByDesign reports whether e is a variant whose algorithm is not meant
// for large messages (all_reduce atomic and spinlock): it is timed with
// fewer launches, and the stall rules do not judge its median against the
// collective's other variants (it is many times slower on every launch,
// which is no stall).
func SlowByDesign(e irisimpl.Entry) bool { return slowLimit(e) > 0 }

// ncclCall is the NCCL baseline of a collective, in nccl-tests' sizes: the
// cell's size is the larger buffer, and a buffer marked per-rank holds one
// rank's share of it (size / world). It does what irisgen's bench
// launches: the rooted collectives use root 0 (Entry.SampleParams 0).
type ncclCall struct {
	sendPerRank, recvPerRank bool
	// inPlace: NCCL runs it in place too, the per-rank buffer at the
	// rank's offset of the other.
	inPlace bool
	// copyEngine: NCCL runs it on copy engines, no kernel, between
	// symmetric windows of a communicator made with NCCL_CTA_POLICY_ZERO
	// (2.28.3 and later; the "cta0" cells).
	copyEngine bool
	run        func(c *nccl.Comm, a ncclArgs) error
}

// ncclArgs are one call's arguments: count elements of the whole buffer,
// per of one rank's share.
type ncclArgs struct {
	send, recv gpu.DevicePtr
	count, per int64
	dt         nccl.DataType
	es         int64
	s          gpu.Stream
}

var (
	ncclAllReduce = &ncclCall{inPlace: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.AllReduce(a.send, a.recv, a.count, a.dt, nccl.Sum, a.s)
	}}
	ncclAllGather = &ncclCall{sendPerRank: true, inPlace: true, copyEngine: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.AllGather(a.send, a.recv, a.per, a.dt, a.s)
	}}
	ncclReduceScatter = &ncclCall{recvPerRank: true, inPlace: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.ReduceScatter(a.send, a.recv, a.per, a.dt, nccl.Sum, a.s)
	}}
	ncclAllToAll = &ncclCall{copyEngine: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.AllToAll(a.send, a.recv, a.per, a.dt, a.es, a.s)
	}}
	ncclBroadcast = &ncclCall{inPlace: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.Broadcast(a.send, a.recv, a.count, a.dt, 0, a.s)
	}}
	ncclReduce = &ncclCall{inPlace: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.Reduce(a.send, a.recv, a.count, a.dt, nccl.Sum, 0, a.s)
	}}
	ncclGather = &ncclCall{sendPerRank: true, copyEngine: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.Gather(a.send, a.recv, a.per, a.dt, 0, a.s)
	}}
	ncclScatter = &ncclCall{recvPerRank: true, copyEngine: true, run: func(c *nccl.Comm, a ncclArgs) error {
		return c.Scatter(a.send, a.recv, a.per, a.dt, 0, a.s)
	}}
	// send_recv: rank 0 sends to rank 1 (ncclSend and ncclRecv in a group),
	// the other ranks idle, as irisgen's (which meet only at its barriers).
	ncclSendRecv = &ncclCall{run: func(c *nccl.Comm, a ncclArgs) error {
		if c.Rank() > 1 {
			return nil
		}
		if err := nccl.GroupStart(); err != nil {
			return err
		}
		var err error
		if c.Rank() == 0 {
			err = c.Send(a.send, a.count, a.dt, 1, a.s)
		} else {
			err = c.Recv(a.recv, a.count, a.dt, 0, a.s)
		}
		return errors.Join(err, nccl.GroupEnd())
	}}
	// shift is nccl-tests' sendrecv: a ring shift, every rank sending to
	// the next and receiving from the previous.
	ncclShift = &ncclCall{run: func(c *nccl.Comm, a ncclArgs) error {
		n := c.World()
		if err := nccl.GroupStart(); err != nil {
			return err
		}
		e1 := c.Send(a.send, a.count, a.dt, (c.Rank()+1)%n, a.s)
		e2 := c.Recv(a.recv, a.count, a.dt, (c.Rank()-1+n)%n, a.s)
		return errors.Join(e1, e2, nccl.GroupEnd())
	}}
)
