package oauth

import (
	"strconv"
	"time"
)

// retryAfterWords says how long to wait in words: "1 second", "5 seconds",
// "2 minutes" (rounded up, as Retry-After is).
func retryAfterWords(d time.Duration) string {
	n, _ := strconv.Atoi(retryAfter(d))
	unit := "second"
	if n >= 120 {
		n, unit = (n+59)/60, "minute"
	}
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
