package irisrt

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Sentinels for errors.Is; every typed error below matches one of them.
var (
	ErrPlacement      = errors.New("tensor not on the symmetric heap")
	ErrAlias          = errors.New("tensors alias")
	ErrShape          = errors.New("wrong tensor shape")
	ErrDType          = errors.New("wrong tensor dtype")
	ErrCapture        = errors.New("not allowed during stream capture")
	ErrBarrierTimeout = errors.New("device barrier timed out")
	ErrDeviceFault    = errors.New("kernel reported an error")
	ErrKernel         = errors.New("kernel code object unusable")
	ErrHeap           = errors.New("symmetric heap error")
	ErrWorld          = errors.New("world failed")
	ErrBarrierMode    = errors.New("unsupported barrier mode")
	ErrAlignment      = errors.New("tensor misaligned")
	ErrNotLive        = errors.New("tensor is not a live heap allocation")
	ErrInUse          = errors.New("in use")
	ErrParam          = errors.New("launch parameter out of range")
	ErrSharedGPU      = errors.New("group splits the ranks of a shared GPU")
	ErrMismatch       = errors.New("ranks launched different things")
	ErrPeerRefused    = errors.New("a peer refused the launch")
	ErrClosed         = errors.New("world, rank, plan or graph closed")
	ErrUnsupported    = errors.New("dtype or op not supported by the variant")
)

// PlacementError: a tensor that peers write (or read without an import) is
// not on this rank's symmetric heap. Nothing was launched.
type PlacementError struct {
	Op, Name string
	Rank     int
	Tensor   Tensor
	// Partial is true when the tensor starts on the heap but runs past its end.
	Partial bool
	// Unordered is true for a tensor peers only read, which the launch would
	// import, but in barrier mode none nothing orders the import.
	Unordered bool
}

func (e *PlacementError) Error() string {
	if e.Unordered {
		return fmt.Sprintf("%s: tensor %q (%s, %d bytes) is not on rank %d's symmetric heap; peers read it, so the launch would copy it "+
			"onto the heap first, but in barrier mode none nothing orders that copy before the peers read it: "+
			"allocate it with rank.Heap().Alloc, or launch with irismodel.BarrierDevice or irismodel.BarrierHost",
			e.Op, e.Name, e.Tensor, e.Tensor.Bytes(), e.Rank)
	}
	where := "is not on"
	if e.Partial {
		where = "runs past the end of"
	}
	return fmt.Sprintf("%s: tensor %q (%s, %d bytes) %s rank %d's symmetric heap, but peers write it: "+
		"allocate it with rank.Heap().Alloc; an import would silently drop the peers' writes",
		e.Op, e.Name, e.Tensor, e.Tensor.Bytes(), where, e.Rank)
}

// Is matches ErrPlacement.
func (e *PlacementError) Is(target error) bool { return target == ErrPlacement }

// AliasError: two tensors of a launch overlap although the variant forbids it,
// or overlap in part where the variant allows only the same tensor.
type AliasError struct {
	Op   string
	A, B string
	TA   Tensor
	TB   Tensor
	// InPlace: the variant runs in place, and the tensors overlap without
	// being the same.
	InPlace bool
	// OwnBlock: the variant runs in place when A is exactly rank Rank's
	// block of B (aliasing: own_block), and A overlaps B otherwise.
	OwnBlock bool
	Rank     int
}

func (e *AliasError) Error() string {
	if e.OwnBlock {
		return fmt.Sprintf("%s: tensors %q (%s) and %q (%s) overlap, but %q is not rank %d's own block of %q: "+
			"this variant runs in place only when %q is exactly %s[%d] (%d bytes from its start), else they may not overlap: "+
			"pass that block, or separate buffers", e.Op, e.A, e.TA, e.B, e.TB, e.A, e.Rank, e.B, e.A, e.B, e.Rank, int64(e.Rank)*e.TA.Bytes())
	}
	if e.InPlace {
		return fmt.Sprintf("%s: tensors %q (%s) and %q (%s) overlap only in part; this variant runs in place "+
			"only when they are the very same tensor (a shifted overlap lets one block overwrite %q before another has read it): "+
			"pass the same tensor for both, or separate buffers", e.Op, e.A, e.TA, e.B, e.TB, e.A)
	}
	return fmt.Sprintf("%s: tensors %q (%s) and %q (%s) overlap, but this variant forbids aliasing "+
		"(peers may still read %q while this rank writes %q): pass separate buffers, or use a variant that allows in-place operation",
		e.Op, e.A, e.TA, e.B, e.TB, e.A, e.B)
}

// Is matches ErrAlias.
func (e *AliasError) Is(target error) bool { return target == ErrAlias }

// ShapeError: a tensor has the wrong number of elements, a nil pointer, or
// does not fit where it has to go.
type ShapeError struct {
	Op, Name string
	Want     int64 // elements (or bytes, per Msg)
	Got      int64
	Msg      string // the specific problem, when not a plain count mismatch
}

func (e *ShapeError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("%s: tensor %q: %s", e.Op, e.Name, e.Msg)
	}
	return fmt.Sprintf("%s: tensor %q has %d elements, want %d (the plan was made for this size: make another plan for other sizes)",
		e.Op, e.Name, e.Got, e.Want)
}

// Is matches ErrShape.
func (e *ShapeError) Is(target error) bool { return target == ErrShape }

// DTypeError: a tensor has the wrong element type.
type DTypeError struct {
	Op, Name  string
	Want, Got irismodel.DType
	Also      []irismodel.DType // further dtypes the tensor may have (index tensors)
}

func (e *DTypeError) Error() string {
	if len(e.Also) > 0 {
		want := e.Want.String()
		for _, d := range e.Also {
			want += " or " + d.String()
		}
		return fmt.Sprintf("%s: tensor %q has dtype %s, want %s: convert the tensor", e.Op, e.Name, e.Got, want)
	}
	return fmt.Sprintf("%s: tensor %q has dtype %s, want %s (the plan was made for %s: make another plan, or convert the tensor)",
		e.Op, e.Name, e.Got, e.Want, e.Want)
}

// Is matches ErrDType.
func (e *DTypeError) Is(target error) bool { return target == ErrDType }

// CaptureError: an operation would have broken a stream capture (it
// allocates, copies between host and device, or waits on the host). Nothing
// was done.
type CaptureError struct {
	Op   string // what was attempted
	What string // why it would break capture
	Fix  string // what to do instead
}

func (e *CaptureError) Error() string {
	return fmt.Sprintf("%s while the stream is capturing: %s, which breaks graph capture; %s", e.Op, e.What, e.Fix)
}

// Is matches ErrCapture.
func (e *CaptureError) Is(target error) bool { return target == ErrCapture }

// BarrierTimeoutError: a kernel on Rank waited for Peer in block Block
// longer than the device timeout. The device state of the whole world is
// undefined afterwards (flags and epochs are out of step).
type BarrierTimeoutError struct {
	Rank, Peer, Block int
	Epoch             uint64
}

func (e *BarrierTimeoutError) Error() string {
	return fmt.Sprintf("device barrier timed out: rank %d, block %d waited for rank %d to reach epoch %d; "+
		"rank %d never arrived (it failed, launched a different plan, or is stuck). "+
		"The world's device state is now undefined: close the world and start it again "+
		"(raise Options.Timeout / IRISGEN_TIMEOUT if the peer was merely slow)",
		e.Rank, e.Block, e.Peer, e.Epoch, e.Peer)
}

// Is matches ErrBarrierTimeout.
func (e *BarrierTimeoutError) Is(target error) bool { return target == ErrBarrierTimeout }

// DeviceFaultError is any other error a kernel reported: a call fault (code
// 2: an index out of range, 3: a receive capacity exceeded), after which
// only that call's results are incomplete, or (World set) an unknown code
// in the world's record, after which the world must be restarted.
type DeviceFaultError struct {
	Code        uint32
	Rank, Block int
	Info        uint64
	World       bool // from the world fault record (sticky): close the world and start it again
}

func (e *DeviceFaultError) Error() string {
	what := fmt.Sprintf("error code %d", e.Code)
	switch e.Code {
	case core.ErrCodeIndex:
		what = fmt.Sprintf("an index out of range (value %d; nothing was written for it)", e.Info)
	case core.ErrCodeCapacity:
		what = fmt.Sprintf("more rows for one destination than its receive capacity (%d rows; the rest were dropped): make the plan with a larger capacity", e.Info)
	}
	if e.World {
		return fmt.Sprintf("kernel on rank %d, block %d reported %s; the world's device state is now undefined: close the world and start it again",
			e.Rank, e.Block, what)
	}
	return fmt.Sprintf("kernel on rank %d, block %d reported %s; the call's results are incomplete, but the kernel went on and met its peers, "+
		"so the world stays usable: fix the input and launch again", e.Rank, e.Block, what)
}

// Is matches ErrDeviceFault.
func (e *DeviceFaultError) Is(target error) bool { return target == ErrDeviceFault }

// KernelError: a kernel code object is missing, stale, or lacks an entry.
type KernelError struct {
	Package        string // import path of the generated package ("" when the plan named none)
	Module, Kernel string
	Looked         []string // where the code object was looked for (missing)
	Stale          bool     // the code object's spec hash differs from the wrapper's
	WantHash       string
	GotHash        string
	Err            error  // underlying platform error, if any
	Command        string // builds the package's code objects (Table.KernelsCommand)
}

func (e *KernelError) Error() string {
	cmd := e.Command
	if cmd == "" {
		cmd = irismodel.DefaultKernelsCommand
	}
	mod := fmt.Sprintf("kernel module %q", e.Module)
	if e.Package != "" {
		mod += " of " + e.Package
	}
	switch {
	case e.Stale:
		return fmt.Sprintf("%s is stale: its spec hash is %q, the generated Go package expects %q (they were made from different specs); "+
			"regenerate the package (`go generate ./...`), rebuild the code objects with `%s` and rebuild the program", mod, e.GotHash, e.WantHash, cmd)
	case e.Kernel != "":
		return fmt.Sprintf("kernel %q in %s: %v; the code object does not match the generated package: "+
			"regenerate it (`go generate ./...`) and rebuild the code objects with `%s`", e.Kernel, mod, e.Err, cmd)
	case e.Err == nil:
		where := "nowhere: there is no Options.Kernels or $IRISGEN_KERNELS, and no package registered code objects"
		if len(e.Looked) > 0 {
			where = "in " + strings.Join(e.Looked, ", ")
		}
		return fmt.Sprintf("%s not found (looked %s); run `%s` and rebuild the program, which embeds the code objects "+
			"(or set IRISGEN_KERNELS / Options.Kernels to where they are)", mod, where, cmd)
	}
	return fmt.Sprintf("%s: %v; rebuild the code objects with `%s`", mod, e.Err, cmd)
}

// Is matches ErrKernel.
func (e *KernelError) Is(target error) bool { return target == ErrKernel }

func (e *KernelError) Unwrap() error { return e.Err }

// HeapError: a heap allocation failed or the heap was used wrongly.
type HeapError struct {
	Rank int
	Op   string // "alloc", "free", "create", "collective"
	Want int64  // bytes requested
	Free int64  // bytes free (largest free block for alloc)
	Size int64  // heap size
	Msg  string
	Err  error
}

func (e *HeapError) Error() string {
	if e.Msg != "" {
		s := fmt.Sprintf("symmetric heap of rank %d: %s", e.Rank, e.Msg)
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		return s
	}
	return fmt.Sprintf("symmetric heap of rank %d is out of space: %d bytes requested, largest free block %d of a %d-byte heap; "+
		"free tensors you no longer need, or raise the heap size with Options.HeapBytes or IRISGEN_HEAP_BYTES",
		e.Rank, e.Want, e.Free, e.Size)
}

// Is matches ErrHeap.
func (e *HeapError) Is(target error) bool { return target == ErrHeap }

func (e *HeapError) Unwrap() error { return e.Err }

// WorldError: the world could not be formed, or a rank failed, left or timed
// out, so the group's host barriers and rendezvous can no longer complete.
type WorldError struct {
	Rank int    // rank reporting it
	Op   string // "join", "barrier", "all-gather", ...
	Peer int    // the rank that failed, or -1
	Msg  string
	Err  error
}

func (e *WorldError) Error() string {
	s := fmt.Sprintf("world: rank %d: %s", e.Rank, e.Op)
	if e.Peer >= 0 {
		s += fmt.Sprintf(": rank %d", e.Peer)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is matches ErrWorld.
func (e *WorldError) Is(target error) bool { return target == ErrWorld }

// maxPeerText bounds how much of a message from another rank (its error,
// its plan's fingerprint) an error quotes: a peer's error may quote its own
// peers', and ranks out of step may send anything at all, so an unbounded
// quote grows with every step they take.
const maxPeerText = 256

// peerText is b, a message from another rank, as an error quotes it: at
// most maxPeerText bytes (and how many more there were), quoted when it is
// not plain text.
func peerText(b []byte) string {
	more := 0
	if len(b) > maxPeerText {
		n := maxPeerText
		for n > 0 && !utf8.RuneStart(b[n]) {
			n-- // cut before a rune, not inside it
		}
		more, b = len(b)-n, b[:n]
	}
	s := string(b)
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == utf8.RuneError }) {
		s = strconv.Quote(s)
	}
	if more > 0 {
		s += fmt.Sprintf(" ... (%d bytes more)", more)
	}
	return s
}

func (e *WorldError) Unwrap() error { return e.Err }

// BarrierModeError: a launch asked for a barrier mode its variant does not
// support.
type BarrierModeError struct {
	Op, Variant string
	Mode        irismodel.Barrier
	Supported   []irismodel.Barrier
}

func (e *BarrierModeError) Error() string {
	names := make([]string, len(e.Supported))
	for i, b := range e.Supported {
		names[i] = b.String()
	}
	return fmt.Sprintf("%s %s: barrier mode %q is not supported by this variant; supported: %s",
		e.Op, e.Variant, e.Mode, strings.Join(names, ", "))
}

// Is matches ErrBarrierMode.
func (e *BarrierModeError) Is(target error) bool { return target == ErrBarrierMode }

// AlignmentError: a tensor's pointer is not a multiple of its element size.
// Nothing was launched.
type AlignmentError struct {
	Op, Name string
	Tensor   Tensor
	Want     int64 // the element size the pointer must be a multiple of
}

func (e *AlignmentError) Error() string {
	return fmt.Sprintf("%s: tensor %q (%s) starts at an address that is not a multiple of %d bytes, its element size: "+
		"the kernels access elements through typed pointers; pass a tensor from Heap.Alloc or a Slice of one "+
		"(any element offset is fine; 16-byte alignment is not required)", e.Op, e.Name, e.Tensor, e.Want)
}

// Is matches ErrAlignment.
func (e *AlignmentError) Is(target error) bool { return target == ErrAlignment }

// LiveError: a tensor lies on a symmetric heap, but not inside a live
// allocation of the caller's (Why says how): the kernel would read or
// write memory that is free or that a plan or group now owns. Nothing was
// launched.
type LiveError struct {
	Op, Name string
	Rank     int // the heap's rank
	Tensor   Tensor
	Why      string
}

func (e *LiveError) Error() string {
	return fmt.Sprintf("%s: tensor %q (%s) on rank %d's symmetric heap %s: pass a tensor from Heap.Alloc (or a Slice of one) "+
		"and free it only after the launches that use it", e.Op, e.Name, e.Tensor, e.Rank, e.Why)
}

// Is matches ErrNotLive.
func (e *LiveError) Is(target error) bool { return target == ErrNotLive }

// InUseError: a plan or heap memory could not be closed, freed or launched
// because something still uses it (By: live graphs, or a launch on another
// goroutine). Nothing was done.
type InUseError struct {
	What string // "plan all_gather push", "heap memory at 0x...", ...
	By   string
}

func (e *InUseError) Error() string { return fmt.Sprintf("%s is in use by %s", e.What, e.By) }

// Is matches ErrInUse.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// platformErr annotates a platform failure with what the runtime was doing.
func platformErr(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }

// SharedGPUGroupError: the world's ranks share GPUs (Options.ShareGPUs) and
// a group passed to NewGroup holds some of the ranks on one GPU but not
// all of them. Every rank gets it, and nothing is reserved.
//
// Why: ranks on one GPU share its CUDA context, and some driver calls wait
// for everything on the GPU (freeing device memory waits for the GPU and
// holds the driver's memory lock meanwhile; a plan's Close synchronizes
// the context). A rank makes them only where its own collectives are done,
// which on a GPU of its own means nothing of its group is left waiting for
// it. On a shared GPU they also wait for the other ranks' kernels: when
// those ranks belong to another group, which runs its collectives out of
// step with this one, such a call can fall between one member's launch of
// a collective and another's, and then the first member's kernel waits
// for a launch that the call holds up until the barrier timeout (TestGroups
// in a world of 4 on one GPU with the pairs {0,1} and {2,3}). A group that
// holds every rank of each GPU it uses runs in step with all of them.
type SharedGPUGroupError struct {
	Rank    int   // the rank reporting it
	Members []int // the group, as world ranks
	GPU     int   // the GPU (device ordinal) it splits
	OnGPU   []int // every world rank on that GPU
}

func (e *SharedGPUGroupError) Error() string {
	var out []int
	for _, q := range e.OnGPU {
		if !slices.Contains(e.Members, q) {
			out = append(out, q)
		}
	}
	return fmt.Sprintf("NewGroup on rank %d: group %v holds some of the ranks %v that share GPU %d (Options.ShareGPUs, IRISGEN_SHARE_GPUS) but not %v: "+
		"ranks on one GPU share its CUDA context, where a call that waits for the whole GPU (freeing device memory, a plan's Close) "+
		"can hold up the launch that another group's collective is waiting for, which deadlocks until the barrier timeout; "+
		"make every group hold all the ranks of each GPU it uses (here all of %v or none), or run the world on as many GPUs as ranks",
		e.Rank, e.Members, e.OnGPU, e.GPU, out, e.OnGPU)
}

// Is matches ErrSharedGPU.
func (e *SharedGPUGroupError) Is(target error) bool { return target == ErrSharedGPU }

// MismatchError: the ranks' launches did not match: this rank's launch
// Launch (its number among the rank's launches) and peer's launch of the
// same number were not the same plan with the same parameters and barrier
// mode. The kernels compare a fingerprint of every launch where they meet
// (a device barrier) and where one waits long for a peer (after 1 ms);
// the host compares it at the host barrier of a launch in mode host.
type MismatchError struct {
	Rank, Peer int
	Launch     uint32
	Block      int    // the block that saw it; -1: the host barrier
	Check      uint32 // this rank's launch fingerprint
	PeerCheck  uint32 // the peer's
	// World: found by a kernel (the world fault record): the peers are out
	// of step, and the world must be restarted. Else found at the host
	// barrier before the kernel, on every rank, and nothing was launched.
	World bool
}

func (e *MismatchError) Error() string {
	where := fmt.Sprintf("rank %d's kernel (block %d) found", e.Rank, e.Block)
	after := "The world's device state is now undefined: close the world and start it again"
	if !e.World {
		where = fmt.Sprintf("at the host barrier before the kernel, rank %d found", e.Rank)
		after = "Nothing was launched"
	}
	return fmt.Sprintf("launches do not match: %s that its launch %d (fingerprint %08x) and rank %d's launch %d (fingerprint %08x) differ: "+
		"the ranks launched different collectives, plans, parameters (a root, a source, an offset, eps) or barrier modes, "+
		"or one rank made a launch call that the others did not (launches are collective: every rank makes the same calls "+
		"in the same order with the same parameters, a refused one included). %s",
		where, e.Launch, e.Check, e.Peer, e.Launch, e.PeerCheck, after)
}

// Is matches ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// PeerRefusedError: rank Peer refused its launch Launch on the host (a
// tensor of the wrong dtype, shape or placement, aliasing, a parameter out
// of range, its own world fault...), and this rank's kernel of that launch,
// which was waiting for it, gave up at once. The world's device state is
// undefined afterwards (the ranks' barrier epochs are out of step): close
// the world and start it again, as after a timeout.
//
// With Copies set, the launch was a copy-engine launch (engine: copy): the
// refusing rank released this rank's stream waits on it, so this rank's
// copies of that launch ran on whatever the peer's buffers held and its
// results of that launch are invalid. The barrier flags stayed in step:
// Check reports it once and the world stays usable (unless Reason is
// RefusedWorldFault: the peer's world is to be closed).
type PeerRefusedError struct {
	Rank   int // the rank whose kernel gave up (whose copies ran without the peer)
	Peer   int // the rank that refused
	Launch uint32
	Reason RefusalReason
	// Err is the peer's own error, where it travels (an in-process world);
	// nil in a multi-process world, where Reason says what kind it was.
	Err error
	// Copies: a copy-engine launch, released by the peer (see above).
	Copies bool
}

func (e *PeerRefusedError) Error() string {
	why := e.Reason.String()
	if e.Err != nil {
		why += ": " + e.Err.Error()
	}
	if e.Copies {
		after := "The world stays usable"
		if e.Reason == RefusedWorldFault {
			after = fmt.Sprintf("Rank %d has a world fault: close the world and start it again", e.Peer)
		}
		return fmt.Sprintf("rank %d refused its launch %d on the host (%s) and released rank %d's copy-engine launch of it, whose copies ran without it: "+
			"rank %d's results of launch %d are invalid; fix rank %d's launch (that rank returned the error). %s",
			e.Peer, e.Launch, why, e.Rank, e.Rank, e.Launch, e.Peer, after)
	}
	return fmt.Sprintf("rank %d refused its launch %d on the host (%s), so rank %d's kernel of that launch, which waited for it, gave up; "+
		"fix rank %d's launch (that rank returned the error). The world's device state is now undefined: close the world and start it again",
		e.Peer, e.Launch, why, e.Rank, e.Peer)
}

// Is matches ErrPeerRefused.
func (e *PeerRefusedError) Is(target error) bool { return target == ErrPeerRefused }

// ClosedError: a call on a world, rank, group, plan, heap or graph that
// was closed (or whose world was closed). Nothing reached the GPU.
type ClosedError struct {
	Op   string // what was called
	What string // what is closed: "the world", "plan all_gather push", ...
}

func (e *ClosedError) Error() string {
	return fmt.Sprintf("%s: %s is closed: make a new one (a world closed by World.Close or Rank.Close releases its ranks, groups, heaps, plans and graphs)", e.Op, e.What)
}

// Is matches ErrClosed.
func (e *ClosedError) Is(target error) bool { return target == ErrClosed }

// UnsupportedError is returned by a plan constructor asked for a dtype or op
// its collective's spec does not list; nothing was allocated.
type UnsupportedError struct {
	Op      string // collective/variant
	What    string // "dtype" or "op"
	Got     string
	Allowed []string // the spec's list
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: %s %s is not supported; the spec allows %s", e.Op, e.What, e.Got, strings.Join(e.Allowed, ", "))
}

// Is matches ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }
