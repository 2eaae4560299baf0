package iam

import (
	"sync"
	"time"
)

// LoginLimiter allows Burst attempts per source per Window; it forgets a
// source once its window has passed so memory stays bounded by live sources.
type LoginLimiter struct {
	Burst  int
	Window time.Duration

	mu      sync.Mutex
	sources map[string]*attempts
}

type attempts struct {
	start time.Time
	count int
}

// NewLoginLimiter returns a limiter of burst attempts per window.
func NewLoginLimiter(burst int, window time.Duration) *LoginLimiter {
	return &LoginLimiter{Burst: burst, Window: window, sources: map[string]*attempts{}}
}

// Allow counts an attempt from source; when over the limit it returns
// false and how long until the source may try again.
func (l *LoginLimiter) Allow(source string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sources) > 10000 {
		for k, a := range l.sources {
			if now.Sub(a.start) >= l.Window {
				delete(l.sources, k)
			}
		}
	}
	a := l.sources[source]
	if a == nil || now.Sub(a.start) >= l.Window {
		a = &attempts{start: now}
		l.sources[source] = a
	}
	a.count++
	if a.count > l.Burst {
		return false, a.start.Add(l.Window).Sub(now)
	}
	return true, 0
}
