package iam

import (
	"net"
	"time"

	"stratum/store"
)

// LoginLimits bound password guessing (SPEC 16.5). The counters are kept
// in the store, so every replica of a PostgreSQL founder shares them.
// An attempt is counted against its source and its (account, source)
// pair before the password is checked, and given back when the password
// is right: concurrent attempts cannot pass a limit, and the rightful
// user is never counted. Failures against an account from anywhere slow
// that account (a delay up to MaxDelay) but never refuse it, so a flood
// cannot lock its operator out.
type LoginLimits struct {
	SourceBurst  int           // attempts in flight or failed per source (5)
	SourceWindow time.Duration // (1 minute)
	PairBurst    int           // per (account, source) (5)
	PairWindow   time.Duration // (15 minutes)
	// AccountFailures failures within AccountWindow slow the account by
	// AccountStep per further failure, at most MaxDelay.
	AccountFailures int           // (10)
	AccountWindow   time.Duration // (15 minutes)
	AccountStep     time.Duration // (250 ms)
	MaxDelay        time.Duration // (2 s)
}

func (l LoginLimits) withDefaults() LoginLimits {
	or := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	ord := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	or(&l.SourceBurst, 5)
	ord(&l.SourceWindow, time.Minute)
	or(&l.PairBurst, 5)
	ord(&l.PairWindow, 15*time.Minute)
	or(&l.AccountFailures, 10)
	ord(&l.AccountWindow, 15*time.Minute)
	ord(&l.AccountStep, 250*time.Millisecond)
	ord(&l.MaxDelay, 2*time.Second)
	return l
}

// LoginSource is the source a limit counts for remote address ip: an
// IPv6 address counts for its /64 (one host holds a whole /64).
func LoginSource(ip string) string {
	a := net.ParseIP(ip)
	if a == nil {
		return ip
	}
	if a.To4() == nil {
		return a.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return a.To4().String()
}

// counter is one limit's fixed window.
type counter struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

// bucketLimits: "s/<source>", "p/<account>/<source>", "a/<account>".
var bucketLimits = store.NewBucket[counter]("iam-login-limits")

type limitKey struct {
	key    string
	window time.Duration
}

func (l LoginLimits) keys(account, source string) (src, pair, acct limitKey) {
	return limitKey{"s/" + source, l.SourceWindow}, limitKey{"p/" + account + "/" + source, l.PairWindow}, limitKey{"a/" + account, l.AccountWindow}
}

// load reads k's window at now (a new one when the last has passed).
func load(tx *store.Tx, k limitKey, now time.Time) (counter, error) {
	c, found, err := bucketLimits.Get(tx, k.key)
	if err != nil {
		return c, err
	}
	if !found || !now.Before(c.Start.Add(k.window)) || now.Before(c.Start) {
		c = counter{Start: now.UTC()}
	}
	return c, nil
}

// reserveLogin counts one attempt of account from source before its
// password is checked, or refuses it when the source or the pair is at
// its limit. It returns how long the account's failures slow it.
func reserveLogin(tx *store.Tx, l LoginLimits, account, source string, now time.Time) (time.Duration, error) {
	srcK, pairK, acctK := l.keys(account, source)
	src, err := load(tx, srcK, now)
	if err != nil {
		return 0, err
	}
	if src.Count >= l.SourceBurst {
		return 0, TooMany(src.Start.Add(srcK.window).Sub(now), "too many login attempts from this address; try again later")
	}
	pair, err := load(tx, pairK, now)
	if err != nil {
		return 0, err
	}
	if pair.Count >= l.PairBurst {
		return 0, TooMany(pair.Start.Add(pairK.window).Sub(now), "too many failed logins for this account from this address; try again later")
	}
	src.Count++
	pair.Count++
	if err := bucketLimits.Put(tx, srcK.key, src); err != nil {
		return 0, err
	}
	if err := bucketLimits.Put(tx, pairK.key, pair); err != nil {
		return 0, err
	}
	acct, err := load(tx, acctK, now)
	if err != nil || acct.Count < l.AccountFailures {
		return 0, err
	}
	return min(time.Duration(acct.Count-l.AccountFailures+1)*l.AccountStep, l.MaxDelay), nil
}

// settleLogin ends a reserved attempt: a failed password keeps its counts
// and adds one to the account's failures; anything else gives them back.
func settleLogin(tx *store.Tx, l LoginLimits, account, source string, failed bool, now time.Time) error {
	srcK, pairK, acctK := l.keys(account, source)
	if failed {
		acct, err := load(tx, acctK, now)
		if err != nil {
			return err
		}
		acct.Count++
		return bucketLimits.Put(tx, acctK.key, acct)
	}
	for _, k := range []limitKey{srcK, pairK} {
		c, found, err := bucketLimits.Get(tx, k.key)
		if err != nil {
			return err
		}
		if !found || c.Count == 0 || !now.Before(c.Start.Add(k.window)) {
			continue // a new window holds nothing of this attempt
		}
		c.Count--
		if err := bucketLimits.Put(tx, k.key, c); err != nil {
			return err
		}
	}
	return nil
}

// purgeLoginLimits deletes the counters whose window has passed.
func purgeLoginLimits(tx *store.Tx, l LoginLimits, now time.Time) error {
	longest := max(l.SourceWindow, l.PairWindow, l.AccountWindow)
	var dead []string
	err := bucketLimits.ForEach(tx, func(k string, c counter) error {
		if !now.Before(c.Start.Add(longest)) {
			dead = append(dead, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range dead {
		if err := bucketLimits.Delete(tx, k); err != nil {
			return err
		}
	}
	return nil
}
