package gpu

import (
	"fmt"
	"math"
	"os"
	"sync"
	"time"
)

// EnvPlatform names the environment variable that forces a platform: "cuda"
// or "hip". Unset or empty, Load tries CUDA, then HIP.
const EnvPlatform = "IRISGEN_PLATFORM"

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

// load loads the platform choice ("", "cuda" or "hip") without caching.
func load(choice string) (Platform, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	var loaders []func() (Platform, []error)
	switch choice {
	case "":
		loaders = append(loaders, tryCUDA, tryHIP)
	case "cuda":
		loaders = append(loaders, tryCUDA)
	case "hip":
		loaders = append(loaders, tryHIP)
	default:
		return nil, fmt.Errorf("%s=%q is not a GPU platform: set it to cuda or hip, or unset it to try CUDA then HIP", EnvPlatform, choice)
	}
	var tried []error
	for _, l := range loaders {
		p, why := l()
		if p != nil {
			return p, nil
		}
		tried = append(tried, why...)
	}
	return nil, &NoPlatformError{Tried: tried}
}

func tryCUDA() (Platform, []error) {
	p, err := loadCUDA()
	if err != nil {
		return nil, []error{err}
	}
	return p, nil
}

// hipLibraries are tried in order; the first that opens is used.
var hipLibraries = []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}

func tryHIP() (Platform, []error) {
	var why []error
	for _, lib := range hipLibraries {
		p, opened, err := loadHIP(lib)
		if err == nil {
			return p, nil
		}
		why = append(why, err)
		if opened {
			// The library is there but unusable (no device, no driver):
			// another name for the same runtime will not do better.
			break
		}
	}
	return nil, why
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
