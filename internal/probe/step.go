package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Keeping the ranks in step. A case's steps are collective (plans, heap
// allocations and frees, host barriers, launches): every rank must make
// the same calls in the same order. A step can fail on one rank alone (a
// capture, a copy, a comparison), and a rank that then leaves the case
// early while its peers go on calls something else than they do: from
// there every later case would fail on every rank with errors quoting each
// other's. So after every step that can fail alone the ranks agree: each
// tells the others whether it failed, and all leave the case at the same
// point when one did. Every message the probe exchanges is tagged with its
// kind and the rank's count of exchanges; a rank that receives a message
// of another kind or count is out of step (a runtime call met a probe
// message, or ranks took different paths), and the probe stops there
// with ErrOutOfStep instead of going on.

// ErrOutOfStep is why a probe stops early: its ranks no longer make the
// same collective calls, so nothing after it could be trusted.
var ErrOutOfStep = errors.New("probe: the ranks are out of step")

// errPeerFailed is agree's answer on a rank that did fine when another
// rank failed: it leaves the case with its result as it is (the failing
// rank's result says why).
var errPeerFailed = errors.New("another rank failed this step")

// fatalError is a failure the probe cannot go on after: the ranks are out
// of step, or the world cannot meet any more.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Message kinds.
const (
	kindAgree  = 'a'
	kindResult = 'r'
)

// msgTag opens every message the probe exchanges.
const msgTag = "IGPB"

// maxText bounds the text a message carries (a failure's reason): every
// rank receives every rank's message.
const maxText = 1024

// stepper keeps one rank's count of exchanges.
type stepper struct {
	r *irisrt.Rank
	n uint32
}

// exchange all-gathers payload of kind with the other ranks and returns
// their payloads, checking that every rank sent the same kind at the same
// count.
func (st *stepper) exchange(kind byte, payload []byte) ([][]byte, error) {
	st.n++
	msg := append([]byte(msgTag), kind)
	msg = binary.LittleEndian.AppendUint32(msg, st.n)
	parts, err := st.r.Group().AllGather(append(msg, payload...))
	if err != nil {
		return nil, &fatalError{err}
	}
	head := len(msgTag) + 5
	for p, b := range parts {
		if len(b) < head || string(b[:len(msgTag)]) != msgTag || b[len(msgTag)] != kind || binary.LittleEndian.Uint32(b[len(msgTag)+1:]) != st.n {
			return nil, &fatalError{fmt.Errorf("%w: at rank %d's exchange %d (%s), rank %d sent %s", ErrOutOfStep, st.r.Rank(), st.n, kindName(kind), p, describeMsg(b))}
		}
		parts[p] = b[head:]
	}
	return parts, nil
}

func kindName(k byte) string {
	switch k {
	case kindAgree:
		return "agreeing on a step"
	case kindResult:
		return "sharing a result"
	}
	return "kind " + strconv.Itoa(int(k))
}

// describeMsg names what a rank out of step sent, briefly.
func describeMsg(b []byte) string {
	if len(b) >= len(msgTag)+5 && string(b[:len(msgTag)]) == msgTag {
		return fmt.Sprintf("its exchange %d (%s)", binary.LittleEndian.Uint32(b[len(msgTag)+1:]), kindName(b[len(msgTag)]))
	}
	n := min(len(b), 32)
	return fmt.Sprintf("a message of the runtime or another program (%d bytes: %q...)", len(b), b[:n])
}

// clipText is s cut to maxText bytes (before a rune).
func clipText(s string) string {
	if len(s) <= maxText {
		return s
	}
	n := maxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf(" ... (%d bytes more)", len(s)-n)
}

// agree ends a step: every rank passes its own failure (nil when it did
// fine) and all learn whether any rank failed. It returns nil when none
// did; the rank's own error when it failed; errPeerFailed when only
// others did; a *fatalError when the ranks cannot agree (out of step, or
// the world failed).
func (st *stepper) agree(local error) error {
	payload := []byte{0}
	if local != nil {
		payload = append([]byte{1}, clipText(local.Error())...)
	}
	parts, err := st.exchange(kindAgree, payload)
	if err != nil {
		return err
	}
	for p, b := range parts {
		if len(b) < 1 || b[0] > 1 {
			return &fatalError{fmt.Errorf("%w: rank %d sent a malformed step (%d bytes)", ErrOutOfStep, p, len(b))}
		}
	}
	if local != nil {
		return local
	}
	for _, b := range parts {
		if b[0] == 1 {
			return errPeerFailed
		}
	}
	return nil
}

// step runs f, then agrees on its outcome (see agree).
func (st *stepper) step(f func() error) error { return st.agree(f()) }

// shareResult merges one case's result over the ranks: every rank gets
// the worst rank's.
func (st *stepper) shareResult(res Result) (Result, error) {
	msg := []byte{0, 0}
	if res.Failed {
		msg[0] = 1
	}
	if res.Captured {
		msg[1] = 1
	}
	msg = binary.LittleEndian.AppendUint32(msg, uint32(res.Replays))
	parts, err := st.exchange(kindResult, append(msg, clipText(res.Reason)...))
	if err != nil {
		return res, err
	}
	all := make([]Result, len(parts))
	for i, b := range parts {
		if len(b) < 6 || b[0] > 1 || b[1] > 1 {
			return res, &fatalError{fmt.Errorf("%w: rank %d sent a malformed result (%d bytes)", ErrOutOfStep, i, len(b))}
		}
		all[i] = res
		all[i].Failed, all[i].Captured = b[0] == 1, b[1] == 1
		all[i].Replays, all[i].Reason = int(binary.LittleEndian.Uint32(b[2:])), string(bytes.Clone(b[6:]))
	}
	return merge(all), nil
}
