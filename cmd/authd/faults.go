//go:build authd_faults

package main

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/authd/authd/storage"
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

// faultAfterDelivered returns the fault AUTHD_FAULT names for the
// back-channel crash test: "kill-after-delivered:N" kills this process with
// SIGKILL right after its Nth delivery is recorded delivered (see
// TestBackchannelKilledMidFanOut).
func faultAfterDelivered() func(*storage.LogoutDelivery, storage.LogoutStatus) {
	n, err := strconv.Atoi(strings.TrimPrefix(os.Getenv("AUTHD_FAULT"), "kill-after-delivered:"))
	if err != nil || !strings.HasPrefix(os.Getenv("AUTHD_FAULT"), "kill-after-delivered:") {
		return nil
	}
	var delivered atomic.Int64
	return func(_ *storage.LogoutDelivery, st storage.LogoutStatus) {
		if st == storage.LogoutDelivered && delivered.Add(1) >= int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}
