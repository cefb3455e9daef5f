// Package internal roots gpusched's private helpers: small shared pieces
// (event heap, statistics, sparse model building) that several packages use
// and that carry no scheduling policy. Helpers live in subpackages of this
// one; nothing outside the module can import them.
package internal
