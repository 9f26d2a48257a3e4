package core

// A dense simplex solver for the small linear programs of gavel-rounds'
// allocation (gavel.go): maximise c·x subject to A·x ≤ b and x ≥ 0, with
// b ≥ 0, so that x = 0 is a feasible start (no phase one). Bland's rule
// picks the entering and leaving variables, so degenerate programs (many
// rows with b = 0) cannot cycle. It runs on the scheduler's own data, in
// rounds, never per placement; maxPivots bounds its work.

// lpEps is the tolerance below which a coefficient counts as zero.
const lpEps = 1e-9

// lpProblem is max c·x s.t. a·x ≤ b, x ≥ 0 (a is row-major, len(b) rows
// of len(c) columns).
type lpProblem struct {
	c []float64
	a [][]float64
	b []float64
}

// solveLP returns an optimal x, or the best x reached and false when the
// pivot budget ran out (x is feasible either way). The problem must have
// b ≥ 0; an unbounded one stops at the pivot that would go to infinity.
func solveLP(p *lpProblem, maxPivots int) ([]float64, bool) {
	m, n := len(p.b), len(p.c)
	// The tableau: m rows of n structural and m slack columns and the
	// right-hand side; the objective row holds -c.
	w := n + m + 1
	tab := make([]float64, (m+1)*w)
	row := func(i int) []float64 { return tab[i*w : (i+1)*w] }
	basis := make([]int, m)
	for i := 0; i < m; i++ {
		r := row(i)
		copy(r, p.a[i])
		r[n+i] = 1
		r[w-1] = max(p.b[i], 0)
		basis[i] = n + i
	}
	obj := row(m)
	for j := 0; j < n; j++ {
		obj[j] = -p.c[j]
	}
	optimal := false
	for pivots := 0; pivots < maxPivots; pivots++ {
		enter := -1
		for j := 0; j < n+m; j++ {
			if obj[j] < -lpEps {
				enter = j // Bland: the lowest index that improves
				break
			}
		}
		if enter < 0 {
			optimal = true
			break
		}
		leave, best := -1, 0.0
		for i := 0; i < m; i++ {
			r := row(i)
			if r[enter] > lpEps {
				ratio := r[w-1] / r[enter]
				if leave < 0 || ratio < best-lpEps || ratio <= best+lpEps && basis[i] < basis[leave] {
					leave, best = i, ratio
				}
			}
		}
		if leave < 0 {
			break // unbounded along enter: stop where it is
		}
		pivot(tab, w, m, leave, enter)
		basis[leave] = enter
	}
	x := make([]float64, n)
	for i, bv := range basis {
		if bv < n {
			x[bv] = max(row(i)[w-1], 0)
		}
	}
	return x, optimal
}

// pivot makes column col basic in row r of the tableau (rows+1 rows of w).
func pivot(tab []float64, w, rows, r, col int) {
	pr := tab[r*w : (r+1)*w]
	inv := 1 / pr[col]
	for j := range pr {
		pr[j] *= inv
	}
	pr[col] = 1
	for i := 0; i <= rows; i++ {
		if i == r {
			continue
		}
		ri := tab[i*w : (i+1)*w]
		f := ri[col]
		if f == 0 {
			continue
		}
		for j := range ri {
			ri[j] -= f * pr[j]
		}
		ri[col] = 0
	}
}
