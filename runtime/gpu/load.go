package gpu

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// EnvPlatform names the environment variable that forces a platform by its
// registered name ("cuda", "hip"). Unset or empty, Load tries every
// registered platform in the order they registered: CUDA, then HIP.
const EnvPlatform = "IRISGEN_PLATFORM"

// A Loader opens a GPU library: the platform, or why not, one error for
// every library file it tried.
type Loader func() (Platform, []error)

// registry holds the registered platforms, in registration order.
var registry struct {
	mu      sync.Mutex
	names   []string
	loaders map[string]Loader
}

// Register makes a platform loadable by name, as database/sql's drivers
// are: Load tries it when IRISGEN_PLATFORM names it, or in registration
// order when the variable is unset. This package registers "cuda" and
// "hip" (the CUDA driver and the HIP runtime, bound through one table of
// their functions, driver.h); a binding of another library registers
// itself in its package's init. Registering a name twice panics.
func Register(name string, load Loader) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, dup := registry.loaders[name]; dup || name == "" || load == nil {
		panic(fmt.Sprintf("gpu: Register(%q): registered twice, unnamed, or without a loader", name))
	}
	if registry.loaders == nil {
		registry.loaders = map[string]Loader{}
	}
	registry.names = append(registry.names, name)
	registry.loaders[name] = load
}

// Platforms lists the registered platforms' names, in registration order.
func Platforms() []string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return append([]string(nil), registry.names...)
}

var (
	loadOnce   sync.Once
	loadResult Platform
	loadErr    error
	// loadMu serialises loads: the C symbol tables are process-wide.
	loadMu sync.Mutex
)

// Load returns the GPU platform of this machine, loaded once and cached.
// When no GPU library can be loaded the error is a *NoPlatformError (so
// errors.Is(err, ErrNoPlatform)) naming every library tried and why it failed.
// An unknown IRISGEN_PLATFORM value is a plain configuration error, not
// ErrNoPlatform, so that it is not mistaken for "no GPU here".
func Load() (Platform, error) {
	loadOnce.Do(func() { loadResult, loadErr = load(os.Getenv(EnvPlatform)) })
	return loadResult, loadErr
}

// load loads the platform choice (a registered name, or "" for the first
// that loads) without caching.
func load(choice string) (Platform, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	names := Platforms()
	if choice != "" {
		if !slices.Contains(names, choice) {
			return nil, fmt.Errorf("%s=%q is not a GPU platform: set it to %s, or unset it to try %s in turn",
				EnvPlatform, choice, strings.Join(names, " or "), strings.Join(names, ", then "))
		}
		names = []string{choice}
	}
	var tried []error
	for _, n := range names {
		registry.mu.Lock()
		l := registry.loaders[n]
		registry.mu.Unlock()
		p, why := l()
		if p != nil {
			return p, nil
		}
		tried = append(tried, why...)
	}
	return nil, &NoPlatformError{Tried: tried}
}

// msToDuration converts an event's elapsed milliseconds.
func msToDuration(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

// captureStatus maps the platforms' capture status values (the same on CUDA
// and HIP: none 0, active 1, invalidated 2).
func captureStatus(v int) (CaptureStatus, error) {
	switch v {
	case 0:
		return CaptureNone, nil
	case 1:
		return CaptureActive, nil
	case 2:
		return CaptureInvalidated, nil
	}
	return 0, fmt.Errorf("unknown stream capture status %d", v)
}
