package learn

import "math"

// maxRank bounds the rank of the population's factorisation; maxDim is
// the size of a row's latent vector (the row's level and its factors).
const (
	maxRank = 3
	maxDim  = maxRank + 1
)

// small is a symmetric matrix of at most maxDim x maxDim, row-major with
// stride maxDim, on the stack: the normal equations of one row or column.
type small [maxDim * maxDim]float64

// vec is a vector of at most maxDim values.
type vec [maxDim]float64

// addLower adds w * h h' to the lower triangle of a (the first n rows
// and columns), all that cholesky reads.
func (a *small) addLower(h *vec, w float64, n int) {
	for i := range n {
		wi := w * h[i]
		for j := range i + 1 {
			a[i*maxDim+j] += wi * h[j]
		}
	}
}

// cholesky factors the first n rows and columns of a, a symmetric
// positive-definite matrix of which it reads the lower triangle, into l (lower triangular, a = l l'). A pivot
// that is not positive (rounding on a nearly singular matrix) is raised to
// a tiny multiple of the diagonal's scale, so the factor always exists.
func cholesky(a *small, n int) small {
	var l small
	scale := 0.0
	for i := range n {
		scale = math.Max(scale, math.Abs(a[i*maxDim+i]))
	}
	floor := 1e-12 * math.Max(scale, 1)
	for j := range n {
		d := a[j*maxDim+j]
		for k := range j {
			d -= l[j*maxDim+k] * l[j*maxDim+k]
		}
		if !(d > floor) {
			d = floor
		}
		ljj := math.Sqrt(d)
		l[j*maxDim+j] = ljj
		for i := j + 1; i < n; i++ {
			s := a[i*maxDim+j]
			for k := range j {
				s -= l[i*maxDim+k] * l[j*maxDim+k]
			}
			l[i*maxDim+j] = s / ljj
		}
	}
	return l
}

// forward solves l y = b for y (l lower triangular).
func (l *small) forward(b *vec, n int) vec {
	var y vec
	for i := range n {
		s := b[i]
		for k := range i {
			s -= l[i*maxDim+k] * y[k]
		}
		y[i] = s / l[i*maxDim+i]
	}
	return y
}

// backward solves l' x = y for x.
func (l *small) backward(y *vec, n int) vec {
	var x vec
	for i := n - 1; i >= 0; i-- {
		s := y[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*maxDim+i] * x[k]
		}
		x[i] = s / l[i*maxDim+i]
	}
	return x
}

// solve returns x with l l' x = b.
func (l *small) solve(b *vec, n int) vec {
	y := l.forward(b, n)
	return l.backward(&y, n)
}
