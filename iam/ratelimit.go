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
	a := l.entry(source, now)
	a.count++
	return l.verdict(a, now)
}

// Check reports, without counting, whether key may try again now: the
// per-account limiter counts only failures (Fail), so a user who logs in
// right is never slowed by it.
func (l *LoginLimiter) Check(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.entry(key, now)
	if a.count >= l.Burst {
		return false, a.start.Add(l.Window).Sub(now)
	}
	return true, 0
}

// Fail counts a failed attempt of key.
func (l *LoginLimiter) Fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entry(key, now).count++
}

func (l *LoginLimiter) verdict(a *attempts, now time.Time) (bool, time.Duration) {
	if a.count > l.Burst {
		return false, a.start.Add(l.Window).Sub(now)
	}
	return true, 0
}

// entry returns key's current window, starting a new one when the last
// has passed; l.mu is held.
func (l *LoginLimiter) entry(key string, now time.Time) *attempts {
	if len(l.sources) > 10000 {
		for k, a := range l.sources {
			if now.Sub(a.start) >= l.Window {
				delete(l.sources, k)
			}
		}
	}
	a := l.sources[key]
	if a == nil || now.Sub(a.start) >= l.Window {
		a = &attempts{start: now}
		l.sources[key] = a
	}
	return a
}
