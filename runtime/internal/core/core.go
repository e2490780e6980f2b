// Package core is the seam between runtime/irisrt and runtime/irisimpl: the
// plan core that irisrt implements (making a plan from a PlanSpec, packing
// and launching its kernel's arguments, numbering launches and telling the
// peers of a refusal, the checks that need the heap's books) and that the
// descriptor interpreter in irisimpl drives, without irisrt exporting it to
// its users. irisrt hands its functions over in init (Set); irisimpl takes
// them (Get). The types that both sides name (PlanSpec, Buffer, Args,
// Cache) live here.
package core

import (
	"encoding/binary"
	"hash/fnv"
	"io/fs"
	"sync"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// The Go side of the kernel ABI (docs/internals.md, "Kernel ABI"): the
// layout of irisgen_ctx, the first member of every kernel's argument struct,
// and the size of the control block at the start of every heap.
const (
	CtxBytes      = 112
	MaxWorld      = irismodel.MaxWorld // IRISGEN_MAX_WORLD
	CtxOffFlags   = 8 * MaxWorld
	CtxOffEpochs  = CtxOffFlags + 8
	CtxOffErr     = CtxOffEpochs + 8
	CtxOffTimeout = CtxOffErr + 8     // uint32 microseconds
	CtxOffLaunch  = CtxOffTimeout + 4 // uint32: the launch's number
	CtxOffRank    = CtxOffLaunch + 4
	CtxOffWorld   = CtxOffRank + 4
	CtxOffBarrier = CtxOffWorld + 4
	CtxOffCheck   = CtxOffBarrier + 4 // uint32: the launch's fingerprint
	_             = uint(CtxBytes - CtxOffCheck - 4)

	// ControlBytes is what the runtime reserves at the start of every
	// heap (a group's too) for its control block (irisgen::detail::control):
	// refused (uint64[MaxWorld]: (reason << 32) | launch, one per peer),
	// then begun (uint64[ControlRing]: (launch << 32) | check).
	ControlBytes = 512
	ControlRing  = 32 // IRISGEN_RING: the records of begun launches
	OffRefused   = 0
	OffBegun     = 8 * MaxWorld
	ControlUsed  = OffBegun + 8*ControlRing
	_            = uint(ControlBytes - ControlUsed) // the block fits its reservation

	// The kernels' error records (irisgen_error): ErrRecords of
	// ErrRecordBytes at ctx.err, [0] the world's, [1] the call's, and the
	// codes they hold.
	ErrRecordBytes  = 32
	ErrRecords      = 2
	ErrCodeTimeout  = 1          // IRISGEN_ERR_TIMEOUT
	ErrCodeIndex    = 2          // IRISGEN_ERR_INDEX
	ErrCodeCapacity = 3          // IRISGEN_ERR_CAPACITY
	ErrCodeMismatch = 4          // IRISGEN_ERR_MISMATCH
	ErrCodeRefused  = 5          // IRISGEN_ERR_REFUSED
	ErrCodeWriting  = 0xffffffff // a kernel is filling the record
)

// PlanSpec is what a plan is made of: which kernel, how it is launched,
// which barrier modes it supports and which heap buffers it needs besides
// the barrier flags. The interpreter works it out from a generated
// package's table.
type PlanSpec struct {
	Package          string // import path of the generated package: where its code objects come from
	Op, Variant      string // "all_gather", "push": used in errors
	Module, SpecHash string // module = collective name; the wrapper's spec hash
	Kernel           string // kernel entry name (irismodel.KernelName)
	Threads, Blocks  int
	Barriers         []irismodel.Barrier // modes the variant supports, default first
	Capturable       []irismodel.Barrier // modes whose launch may be captured
	Workspace        []Buffer            // heap, zeroed at plan creation
	Staging          []Buffer            // heap, for tensors with placement import
	// Sizes are the size parameters the plan was made for: like the rest
	// of the spec, every rank must make the plan with the same ones.
	Sizes []int64
	// Local: the kernel never waits for or touches a peer (all its tensors
	// local, barrier mode none only), so a rank may launch it alone; its
	// launches are not numbered.
	Local bool
	// Copy: a copy-engine variant (irismodel.EngineCopy). The plan loads
	// no kernel (Module and Kernel are unused); a launch enqueues the
	// copies of its Args (Args.Copies) in place of a kernel, between the
	// barriers of its mode made of stream memory operations on the plan's
	// flags.
	Copy bool
	// MaxCopies bounds a copy-engine launch's copies on this rank
	// (irismodel.MaxIssued); zero: no bound known.
	MaxCopies int
	// Embedded holds the package's embedded code objects
	// (kernels/<file>), found after Options.Kernels and $IRISGEN_KERNELS;
	// KernelsCommand is the command errors about them name.
	Embedded       fs.FS
	KernelsCommand string
}

// Buffer is a named heap buffer of a plan.
type Buffer struct {
	Name  string
	Bytes int64
}

// Args is a kernel's argument struct being packed: the CtxBytes-byte ctx,
// then 8 little-endian bytes per tensor pointer and per int64, in the order
// of the kernel's <collective>_args struct. A plan owns one and hands it
// out for each launch; Err, once set, makes the launch refuse with it.
type Args struct {
	B    []byte
	Ptrs []gpu.DevicePtr // the pointers among B (a graph holds their allocations)
	Err  error
	// Copies are a copy-engine launch's copies, in issue order (PlanSpec.Copy).
	Copies []Copy
}

// Copy is one copy of a copy-engine launch: Bytes from Src to Dst, device
// addresses as mapped on the launching rank's device (a peer's heap
// included).
type Copy struct {
	Dst, Src gpu.DevicePtr
	Bytes    int64
}

// Ptr appends a tensor pointer.
func (a *Args) Ptr(p gpu.DevicePtr) *Args {
	if a.Err != nil {
		return a // refused already (and a refused Args is never written)
	}
	a.B = binary.LittleEndian.AppendUint64(a.B, uint64(p))
	a.Ptrs = append(a.Ptrs, p)
	return a
}

// I64 appends an int64.
func (a *Args) I64(v int64) *Args {
	if a.Err != nil {
		return a
	}
	a.B = binary.LittleEndian.AppendUint64(a.B, uint64(v))
	return a
}

// Cache is a rank's cache of the plans its convenience calls made, keyed by
// the interpreter.
type Cache struct {
	Mu    sync.Mutex
	Plans map[string]any
}

// Plans is the plan core of irisrt, over its rank R, plan P and tensor T.
type Plans[R, P, T any] struct {
	// NewPlan makes a plan on r (collective: see irisrt's newPlan).
	NewPlan func(r R, s PlanSpec) (P, error)
	// Buffer is the address of a plan's workspace or staging buffer.
	Buffer func(p P, name string) gpu.DevicePtr
	// Args resets the plan's argument buffer to its ctx and holds the plan
	// until Launch returns; while another goroutine holds it, the Args it
	// returns makes Launch refuse with an *irisrt.InUseError.
	Args func(p P) *Args
	// Staged appends t's address when t lies on the heap, otherwise the
	// address of staging buffer name, into which Launch copies t first.
	Staged func(p P, a *Args, name string, t T)
	// StageOut appends the address of staging buffer name, which Launch
	// copies into t after the launch's last barrier, wherever t lies: a
	// copy-engine variant's peers write a tensor only one rank passes at
	// its staging buffer, whose heap offset every rank knows.
	StageOut func(p P, a *Args, name string, t T)
	// Launch launches the plan's kernel as launch number n with
	// fingerprint check; enqueued says whether it reached the stream.
	Launch func(p P, s gpu.Stream, mode irismodel.Barrier, a *Args, n, check uint32) (enqueued bool, err error)
	// ID is the plan's identity in its launches' fingerprints (PlanID).
	ID func(p P) uint64
	// Skip makes Launch's checks of the plan, the mode and the stream for
	// a launch that enqueues nothing.
	Skip func(p P, s gpu.Stream, mode irismodel.Barrier) error
	// Rank is the rank a plan was made on; Spec the spec it was made from.
	Rank func(p P) R
	Spec func(p P) PlanSpec
	// Closed reports whether r was closed; ClosedErr is then the
	// *irisrt.ClosedError of op.
	Closed    func(r R) bool
	ClosedErr func(r R, op string) error
	// NextLaunch numbers a launch call (0 for a plan that never meets its
	// peers); Refuse tells the peers that launch n was refused with err,
	// and returns err. RefuseLaunch is Refuse for launch n of plan p in
	// mode (a plan with something to launch): a copy-engine plan also
	// releases the stream waits its peers' launch n makes on this rank.
	NextLaunch   func(r R, meets bool) uint32
	Refuse       func(r R, s gpu.Stream, n uint32, err error) error
	RefuseLaunch func(p P, s gpu.Stream, n uint32, mode irismodel.Barrier, err error) error
	// MaxBlocks is a variant's largest grid on r (smaller where ranks
	// share a GPU).
	MaxBlocks func(r R, maxBlocks int) int
	// Cache is r's plan cache.
	Cache func(r R) *Cache

	// The launch checks that need the heap's books.
	CheckTensor      func(op, name string, t T, want irismodel.DType, n int64) error
	CheckTensorOneOf func(op, name string, t T, want []irismodel.DType, n int64) error
	CheckLive        func(op, name string, r R, t T) error
	CheckHeap        func(op, name string, r R, t T) error
}

// PlanID is a plan's identity in the fingerprints of its launches: a hash
// of its spec's digest (equal on every rank, which newPlan compares) and of
// where its flags lie on the heap (so two plans of one spec differ).
func PlanID(digest []byte, flagsOffset int64) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(digest)
	return h.Sum64() ^ mix64(uint64(flagsOffset))
}

// Fingerprint is the check of launch n of plan (PlanID) in mode with the
// parameters ps: equal on two ranks exactly when they launch the same plan
// with the same parameters and mode as the same launch (up to a 2^-32
// chance). The kernel gets it in irisgen_ctx.check. It does not allocate.
func Fingerprint(plan uint64, n uint32, mode irismodel.Barrier, ps []irismodel.Param) uint32 {
	h := mix64(plan ^ uint64(n))
	h = mix64(h ^ uint64(mode)<<56)
	for _, x := range ps {
		h = mix64(h ^ x.Word())
	}
	return uint32(h ^ h>>32)
}

// mix64 is a 64-bit finalizer (splitmix64's).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

var plans any

// Set hands over irisrt's plan core; irisrt calls it in init.
func Set[R, P, T any](p Plans[R, P, T]) { plans = p }

// Get is the plan core irisrt handed over; irisimpl, which imports irisrt,
// calls it after irisrt's init.
func Get[R, P, T any]() Plans[R, P, T] { return plans.(Plans[R, P, T]) }
