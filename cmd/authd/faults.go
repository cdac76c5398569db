//go:build authd_faults

package main

import (
	"os"
	"syscall"
)

// faultAfterCommit returns the fault AUTHD_FAULT names, for crash tests:
// "kill-after-commit" kills this process with SIGKILL right after an
// exchange's transaction commits (before the replay cache is written or
// the answer sent). It exists only in binaries built with
// -tags authd_faults (see TestRetryAfterProcessKilledAfterCommit).
func faultAfterCommit() func() {
	if os.Getenv("AUTHD_FAULT") != "kill-after-commit" {
		return nil
	}
	return func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
}

// faultBeforeMailSend: "kill-before-mail-send" kills this process with
// SIGKILL when its mail worker has claimed a message and is about to send
// it (the state change that queued it committed long before; see
// TestMailSentAfterProcessKilledBeforeSend).
func faultBeforeMailSend() func() {
	if os.Getenv("AUTHD_FAULT") != "kill-before-mail-send" {
		return nil
	}
	return func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
}
