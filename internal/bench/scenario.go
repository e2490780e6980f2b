package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// A scenario times collectives as programs use them together, where the
// size sweep times each variant alone at nccl-tests' sizes. It is data:
// the collectives it launches (all in the package, else it does not
// apply), those it takes out of the sweep, and how it times them: a chain
// (launches over a grid of sizes, the tensors of one passed to the next)
// or, for what a chain cannot say (MoE's routing and expert), a function.
// Adding a collective adds nothing here: the sweep times it.
type scenario struct {
	name  string   // what Config.Collectives selects it by
	needs []string // collectives it launches
	owns  []string // collectives the sweep leaves to it
	torch bool     // baselines.py times it under its name
	chain *chain
	// time runs a scenario that is not a chain.
	time func(w *irisrt.World, cfg Config, add func(Row)) error
}

// scenarios are the benchmark's scenarios, read when used (tests shrink
// their grids).
func scenarios() []scenario {
	return []scenario{rmsnormScenario(), moeScenario()}
}

// applicable lists the scenarios whose collectives entries hold, each
// with the entries it uses.
func applicable(entries []irisimpl.Entry) []scenario {
	var out []scenario
	for _, sc := range scenarios() {
		if !slices.ContainsFunc(sc.needs, func(c string) bool {
			return !slices.ContainsFunc(entries, func(e irisimpl.Entry) bool { return e.Collective == c })
		}) {
			out = append(out, sc)
		}
	}
	return out
}

func (sc scenario) run(w *irisrt.World, cfg Config, add func(Row)) error {
	if sc.chain != nil {
		return sc.chain.run(w, cfg, sc.name, add)
	}
	return sc.time(w, cfg, add)
}

// chain describes a scenario's timed call as launches over a grid of
// sizes, in one data type: a row for every variant of the call's first
// link at every point and mode, then one for the baseline path, the
// fastest of its variants. Tensors start zeroed, parameters are
// Entry.SampleParams 0, every launch is in its benchMode.
type chain struct {
	dtype irismodel.DType
	grid  []axis // rows: the first axis outermost
	tails []axis // the -tails grid (nil: none)
	call  []link
	// baseline, when set, is another path to the same result, timed at
	// every point and mode and reported as one row: Impl, Variant, and a
	// note naming the launches of its fastest variant.
	baseline        []link
	baselineImpl    string
	baselineVariant string
}

// axis is one size of a chain's grid and the values it takes.
type axis struct {
	name   string
	values []int64
}

// link is one launch of a chain.
type link struct {
	collective string
	variant    string // "": every variant of the collective not slow by design, each in turn
	// sizes are the collective's size parameters, each the product of the
	// grid's axes it names (all_reduce's n of a [tokens, hidden] buffer:
	// tokens x hidden).
	sizes [][]string
	// from maps a tensor of the collective to a tensor of an earlier link,
	// passed instead of its own (the unfused path's norm reads the
	// all_reduce's output).
	from map[string]tensorRef
}

// tensorRef names a tensor of a chain's earlier link.
type tensorRef struct {
	link   int
	tensor string
}

// step is one resolved launch of a timed call.
type step struct {
	e     irisimpl.Entry
	dt    irismodel.DType
	sizes []int64
	from  map[int]stepTensor // tensor index -> an earlier step's tensor
	// inPlace: each input the variant may pass as this rank's own block of
	// an output (ownBlocks) is that block.
	inPlace bool
	// barrier, when set, is the launch's barrier mode (Config.Barrier);
	// nil: benchMode's.
	barrier *irismodel.Barrier
}

// mode is the barrier mode st launches in.
func (st step) mode() irismodel.Barrier {
	if st.barrier != nil {
		return *st.barrier
	}
	return benchMode(st.e)
}

// ownBlocks lists e's pairs of user tensor positions (input, output) whose
// input may be this rank's own block of the output (aliasing: own_block).
func ownBlocks(e irisimpl.Entry) [][2]int {
	var out [][2]int
	at := func(name string) int {
		return slices.IndexFunc(e.Tensors, func(t irisimpl.TensorInfo) bool { return t.Name == name })
	}
	for _, p := range e.Descriptor().AliasPairs() {
		if !p.OwnBlock {
			continue
		}
		a, b := at(p.A), at(p.B)
		if e.Tensors[a].Dir != irismodel.In {
			a, b = b, a
		}
		out = append(out, [2]int{a, b})
	}
	return out
}

type stepTensor struct{ step, tensor int }

// prepare makes the plan and the zeroed heap tensors of every step on r,
// in order, and returns one call of the steps and what frees them.
// Collective, like the plans.
func prepare(r *irisrt.Rank, steps []step) (call func() error, done func(), err error) {
	var frees []func()
	done = func() {
		for i := len(frees) - 1; i >= 0; i-- {
			frees[i]()
		}
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	s := r.Stream()
	tensors := make([][]irisrt.Tensor, len(steps))
	calls := make([]func() error, len(steps))
	for i, st := range steps {
		op := ""
		if len(st.e.Ops) > 0 {
			op = st.e.Ops[0]
		}
		p, err := st.e.New(r, st.dt, op, st.sizes)
		if err != nil {
			return nil, nil, err
		}
		frees = append(frees, func() { p.Close() })
		ts, free, err := st.e.Alloc(r, st.dt, st.sizes)
		if err != nil {
			return nil, nil, err
		}
		frees = append(frees, free)
		for _, x := range ts {
			if err := r.Device().MemsetD8Async(x.Ptr, 0, x.Bytes(), s); err != nil {
				return nil, nil, err
			}
		}
		ts = slices.Clone(ts)
		for ti, ref := range st.from {
			ts[ti] = tensors[ref.step][ref.tensor]
		}
		if st.inPlace {
			for _, pr := range ownBlocks(st.e) {
				n := ts[pr[0]].Len
				ts[pr[0]] = ts[pr[1]].Slice(int64(r.Rank())*n, n)
			}
		}
		tensors[i] = ts
		ps := st.e.SampleParams(r.World(), 0)
		passed, mode := st.e.TensorsFor(r.Rank(), ts, ps), st.mode()
		calls[i] = func() error { return p.LaunchParams(s, passed, ps, mode) }
	}
	return func() error {
		for _, c := range calls {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}, done, nil
}

// point is one point of a chain's grid: a value per axis.
type point map[string]int64

// points lists the grid's points, the first axis outermost.
func points(grid []axis) []point {
	out := []point{{}}
	for _, a := range grid {
		var next []point
		for _, p := range out {
			for _, v := range a.values {
				q := point{a.name: v}
				for k, x := range p {
					q[k] = x
				}
				next = append(next, q)
			}
		}
		out = next
	}
	return out
}

// resolve turns links into steps at p, with each link of variant ""
// taking the variant of choice (one chain has at most one such link).
func resolve(entries []irisimpl.Entry, links []link, dt irismodel.DType, p point, choice string) ([]step, error) {
	steps := make([]step, len(links))
	for i, l := range links {
		v := l.variant
		if v == "" {
			v = choice
		}
		j := slices.IndexFunc(entries, func(e irisimpl.Entry) bool { return e.Collective == l.collective && e.Variant == v })
		if j < 0 {
			return nil, fmt.Errorf("the package has no %s/%s", l.collective, v)
		}
		st := step{e: entries[j], dt: dt, from: map[int]stepTensor{}}
		for _, names := range l.sizes {
			n := int64(1)
			for _, a := range names {
				n *= p[a]
			}
			st.sizes = append(st.sizes, n)
		}
		for name, ref := range l.from {
			ti, ri := slices.IndexFunc(st.e.Tensors, func(t irisimpl.TensorInfo) bool { return t.Name == name }), -1
			if ref.link >= 0 && ref.link < i {
				ri = slices.IndexFunc(steps[ref.link].e.Tensors, func(t irisimpl.TensorInfo) bool { return t.Name == ref.tensor })
			}
			if ti < 0 || ri < 0 {
				return nil, fmt.Errorf("chain: %s.%s from link %d's %s: no such tensor in an earlier link", l.collective, name, ref.link, ref.tensor)
			}
			st.from[ti] = stepTensor{ref.link, ri}
		}
		steps[i] = st
	}
	return steps, nil
}

// choices are the variants a chain's links of variant "" take in turn:
// every variant of that collective not slow by design ("" alone when
// there is no such link).
func choices(entries []irisimpl.Entry, links []link) []string {
	i := slices.IndexFunc(links, func(l link) bool { return l.variant == "" })
	if i < 0 {
		return []string{""}
	}
	var out []string
	for _, e := range entries {
		if e.Collective == links[i].collective && slowLimit(e) == 0 {
			out = append(out, e.Variant)
		}
	}
	return out
}

// bytesOf is a row's size at a point: the bytes of the largest user tensor
// of the call's first launch.
func bytesOf(st step, world int) int64 {
	var most int64
	for _, t := range st.e.Tensors {
		most = max(most, t.Numel(world, st.sizes)*t.ElemType(st.dt).Size())
	}
	return most
}

// describe names a path's launches, e.g. "all_reduce one_shot, then
// residual_rmsnorm local".
func describe(steps []step) string {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = st.e.Collective + " " + st.e.Variant
	}
	return strings.Join(parts, ", then ")
}

func (c *chain) run(w *irisrt.World, cfg Config, name string, add func(Row)) error {
	dts := c.dtype.String()
	for _, p := range points(c.grid) {
		for _, mode := range cfg.Modes {
			var bytes int64
			for _, v := range choices(cfg.Entries, c.call) {
				steps, err := resolve(cfg.Entries, c.call, c.dtype, p, v)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				bytes = bytesOf(steps[0], w.Size())
				row := Row{Collective: name, Variant: steps[0].e.Variant, DType: dts, Bytes: bytes, Mode: mode, TimeUS: math.NaN()}
				if err := timeCell(w, cfg, &row, steps, Iterations(bytes)); err != nil {
					return err
				}
				add(row)
			}
			if c.baseline == nil {
				continue
			}
			best := Row{Impl: c.baselineImpl, Collective: name, Variant: c.baselineVariant, DType: dts, Bytes: bytes, Mode: mode, TimeUS: math.Inf(1)}
			for _, v := range choices(cfg.Entries, c.baseline) {
				steps, err := resolve(cfg.Entries, c.baseline, c.dtype, p, v)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				row := Row{Collective: name, Variant: describe(steps), DType: dts, Bytes: bytes, Mode: mode, TimeUS: math.NaN()}
				if err := timeCell(w, cfg, &row, steps, Iterations(bytes)); err != nil {
					return err
				}
				if row.TimeUS < best.TimeUS {
					best.TimeUS, best.MinUS, best.MaxUS, best.Repeats, best.Note = row.TimeUS, row.MinUS, row.MaxUS, row.Repeats, describe(steps)
				}
			}
			if math.IsInf(best.TimeUS, 1) {
				best.TimeUS = math.NaN()
			}
			add(best)
		}
	}
	return nil
}
