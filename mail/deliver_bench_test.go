package mail

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDeliver: messages enqueued (each in its own transaction, as a
// sign-up writes one) and delivered by W workers to a go-smtp server on
// loopback, one SMTP connection per message. ns/op is per message, from
// the first enqueue to the last delivery.
func BenchmarkDeliver(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			h := newHarness(b, 0, nil)
			var stops []func()
			for i := range workers {
				w, _ := h.worker(b, fmt.Sprintf("bench-%d", i), 30*time.Second)
				stops = append(stops, run(b, w))
			}
			defer func() {
				for _, s := range stops {
					s()
				}
			}()
			b.ResetTimer()
			for i := range b.N {
				h.send(b, fmt.Sprintf("bench-%d@example.test", i), "123456")
			}
			for deadline := time.Now().Add(5 * time.Minute); len(h.smtp.Delivered()) < b.N; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d delivered", len(h.smtp.Delivered()), b.N)
				}
			}
			b.StopTimer()
		})
	}
}
