package tests

// explore visits every state of a model of w ranks reachable from start,
// each step one rank's move (step: the state it moves to, false when it
// waits or is done, or the rule the move breaks), and returns the number of
// states, or the first rule broken, or stuck's error for a state where
// every rank waits and not all are done. The protocol models of the rooted
// collectives (lamportcredits_test.go, relayflags_test.go) use it.
func explore[S comparable](start S, w int, step func(S, int) (S, bool, error), done func(S) bool, stuck func(S) error) (int, error) {
	seen := map[S]bool{start: true}
	stack := []S{start}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		moved := false
		for r := range w {
			n, ok, err := step(s, r)
			if err != nil {
				return len(seen), err
			}
			if ok {
				moved = true
				if !seen[n] {
					seen[n] = true
					stack = append(stack, n)
				}
			}
		}
		if !moved && !done(s) {
			return len(seen), stuck(s)
		}
	}
	return len(seen), nil
}

// pastCall reports whether every rank's call number (k, one a rank) is
// past call n: the models' ranks make calls 1 to n, and are done then.
func pastCall(k []int, n int) bool {
	for _, c := range k {
		if c <= n {
			return false
		}
	}
	return true
}
