package main

import (
	"testing"
	"time"
)

func TestPerfConfigValidate(t *testing.T) {
	for _, c := range []struct {
		p  perfConfig
		ok bool
	}{
		{perfConfig{}, true},
		{perfConfig{ClientCacheTTL: 2 * time.Second}, true},
		{perfConfig{ClientCacheTTL: -time.Second}, false},
		{perfConfig{ClientCacheTTL: time.Hour}, false},
	} {
		err := c.p.validate()
		if (err == nil) != c.ok {
			t.Errorf("%+v: err = %v, want ok=%v", c.p, err, c.ok)
		}
		if err != nil {
			if _, isUsage := err.(usageError); !isUsage {
				t.Errorf("%+v: %v is not a usage error (exit 2)", c.p, err)
			}
		}
	}
	if n := defaultPoolMaxConns(); n < 8 {
		t.Errorf("defaultPoolMaxConns() = %d, want at least 8", n)
	}
}
