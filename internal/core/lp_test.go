package core

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

func TestSolveLPKnown(t *testing.T) {
	// max 3x + 5y s.t. x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18: x=2, y=6, 36.
	p := &lpProblem{c: []float64{3, 5}, a: [][]float64{{1, 0}, {0, 2}, {3, 2}}, b: []float64{4, 12, 18}}
	x, ok := solveLP(p, 100)
	if !ok || math.Abs(x[0]-2) > 1e-9 || math.Abs(x[1]-6) > 1e-9 {
		t.Fatalf("x = %v, %v; want [2 6]", x, ok)
	}
	// Degenerate max-min: max t s.t. t - x1 ≤ 0, t - x2 ≤ 0, x1 + x2 ≤ 1.
	p = &lpProblem{c: []float64{1, 0, 0}, a: [][]float64{{1, -1, 0}, {1, 0, -1}, {0, 1, 1}}, b: []float64{0, 0, 1}}
	x, ok = solveLP(p, 100)
	if !ok || math.Abs(x[0]-0.5) > 1e-9 {
		t.Fatalf("max-min x = %v, %v; want t = 0.5", x, ok)
	}
}

// TestSolveLPIsFeasibleAndOptimal: on random programs with b ≥ 0 and a
// bounded feasible set, the answer is feasible and its value is the best
// vertex's (every vertex enumerated: n of the constraints, x ≥ 0
// included, held with equality).
func TestSolveLPIsFeasibleAndOptimal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(rt, "n")
		m := rapid.IntRange(1, 6).Draw(rt, "m")
		p := &lpProblem{c: make([]float64, n), b: make([]float64, m+n)}
		for j := range p.c {
			p.c[j] = float64(rapid.IntRange(-5, 10).Draw(rt, "c"))
		}
		for i := 0; i < m; i++ {
			r := make([]float64, n)
			for j := range r {
				r[j] = float64(rapid.IntRange(-3, 6).Draw(rt, "a"))
			}
			p.a = append(p.a, r)
			p.b[i] = float64(rapid.IntRange(0, 20).Draw(rt, "b"))
		}
		for j := 0; j < n; j++ { // x_j ≤ 10 bounds the set
			r := make([]float64, n)
			r[j] = 1
			p.a = append(p.a, r)
			p.b[m+j] = 10
		}
		x, ok := solveLP(p, 1000)
		if !ok {
			rt.Fatalf("no optimum within 1000 pivots")
		}
		feasible := func(y []float64) bool {
			for i, r := range p.a {
				s := 0.0
				for j := range r {
					s += r[j] * y[j]
				}
				if s > p.b[i]+1e-6 {
					return false
				}
			}
			for _, v := range y {
				if v < -1e-9 {
					return false
				}
			}
			return true
		}
		value := func(y []float64) float64 {
			s := 0.0
			for j := range y {
				s += p.c[j] * y[j]
			}
			return s
		}
		if !feasible(x) {
			rt.Fatalf("x = %v is infeasible", x)
		}
		got := value(x)
		// Every constraint as a row (a, b), x_j ≥ 0 as -x_j ≤ 0.
		rows, rhs := append([][]float64(nil), p.a...), append([]float64(nil), p.b...)
		for j := 0; j < n; j++ {
			r := make([]float64, n)
			r[j] = -1
			rows, rhs = append(rows, r), append(rhs, 0)
		}
		best, found := math.Inf(-1), false
		var pick func(from int, chosen []int)
		pick = func(from int, chosen []int) {
			if len(chosen) == n {
				if v, ok := solveSquare(rows, rhs, chosen); ok && feasible(v) {
					found = true
					best = max(best, value(v))
				}
				return
			}
			for i := from; i < len(rows); i++ {
				pick(i+1, append(chosen, i))
			}
		}
		pick(0, nil)
		if !found || math.Abs(best-got) > 1e-6*max(1, math.Abs(best)) {
			rt.Fatalf("x = %v has value %v; the best vertex has %v (found %v)", x, got, best, found)
		}
	})
}

// solveSquare solves rows[chosen]·v = rhs[chosen] by Gaussian elimination
// with partial pivoting; false when singular.
func solveSquare(rows [][]float64, rhs []float64, chosen []int) ([]float64, bool) {
	n := len(chosen)
	m := make([][]float64, n)
	for i, k := range chosen {
		m[i] = append(append([]float64(nil), rows[k]...), rhs[k])
	}
	for col := 0; col < n; col++ {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		if math.Abs(m[p][col]) < 1e-9 {
			return nil, false
		}
		m[col], m[p] = m[p], m[col]
		for r := 0; r < n; r++ {
			if r == col {
				continue
			}
			f := m[r][col] / m[col][col]
			for k := col; k <= n; k++ {
				m[r][k] -= f * m[col][k]
			}
		}
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = m[i][n] / m[i][i]
	}
	return v, true
}
