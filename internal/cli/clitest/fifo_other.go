//go:build !unix

package clitest

import "errors"

func mkfifo(string) error { return errors.New("no named pipes on this system") }
