//go:build !authd_faults

package main

import "github.com/authd/authd/storage"

// faultAfterCommit is nil in every real build: fault injection exists only
// with -tags authd_faults (faults.go).
func faultAfterCommit() func() { return nil }

// faultBeforeMailSend is nil in every real build (faults.go).
func faultBeforeMailSend() func() { return nil }

// faultAfterDelivered is nil in every real build (faults.go).
func faultAfterDelivered() func(*storage.LogoutDelivery, storage.LogoutStatus) { return nil }
