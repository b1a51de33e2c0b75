package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"
)

// maxAuthWaiters bounds the requests waiting for the bcrypt slot; beyond
// it a request with unverified credentials gets 429 at once, without
// bcrypt, so a flood of wrong passwords costs one core at most and no
// memory.
const maxAuthWaiters = 64

// authenticator checks HTTP basic credentials against bcrypt hashes, as
// Prometheus' web config does. Its users are swapped whole on reload
// (Server.ApplyWeb), so a changed or removed password is refused from the
// next request on.
//
// bcrypt is slow on purpose (tens of ms at cost 10), so:
//   - a verified user/password/hash triple is remembered by its SHA-256,
//     and a logged-in client (a dashboard polling every few seconds) does
//     not pay bcrypt nor wait behind anyone else's;
//   - the checks that do run bcrypt run one at a time, so a flood of
//     wrong passwords saturates at most one core;
//   - an unknown user is checked against a dummy hash at the highest
//     configured cost, so it takes as long as a wrong password and user
//     names cannot be told apart by timing.
type authenticator struct {
	state   atomic.Pointer[authState]
	slot    chan struct{}
	waiting atomic.Int32
}

// authState is one generation of users; a reload builds a new one, with
// an empty cache.
type authState struct {
	users map[string]string
	dummy []byte

	mu   sync.Mutex
	good map[[32]byte]struct{}
}

func newAuthenticator() *authenticator {
	return &authenticator{slot: make(chan struct{}, 1)}
}

// newAuthState checks the hashes and builds the dummy hash; nil users
// (or none) turn auth off.
func newAuthState(users map[string]string) (*authState, error) {
	st := &authState{users: users, good: map[[32]byte]struct{}{}}
	if len(users) == 0 {
		return st, nil
	}
	cost := bcrypt.MinCost
	for _, h := range users {
		c, err := bcrypt.Cost([]byte(h))
		if err != nil {
			return nil, err
		}
		cost = max(cost, c)
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte(rand.Text()), cost)
	if err != nil {
		return nil, err
	}
	st.dummy = dummy
	return st, nil
}

func (st *authState) remembered(key [32]byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.good[key]
	return ok
}

func (st *authState) remember(key [32]byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.good) > 1000 {
		clear(st.good)
	}
	st.good[key] = struct{}{}
}

// check reports whether the request may pass; code is the answer
// otherwise (401, or 429 when too many checks wait).
func (a *authenticator) check(r *http.Request) (ok bool, code int) {
	st := a.state.Load()
	if st == nil || len(st.users) == 0 {
		return true, 0
	}
	user, pass, given := r.BasicAuth()
	if !given {
		return false, http.StatusUnauthorized
	}
	hash, known := st.users[user]
	key := sha256.Sum256([]byte(user + "\x00" + pass + "\x00" + hash))
	if known && st.remembered(key) {
		return true, 0
	}
	if a.waiting.Add(1) > maxAuthWaiters {
		a.waiting.Add(-1)
		return false, http.StatusTooManyRequests
	}
	defer a.waiting.Add(-1)
	if !acquire(r.Context(), a.slot) {
		return false, http.StatusUnauthorized
	}
	defer func() { <-a.slot }()
	if !known {
		_ = bcrypt.CompareHashAndPassword(st.dummy, []byte(pass))
		return false, http.StatusUnauthorized
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass)) != nil {
		return false, http.StatusUnauthorized
	}
	st.remember(key)
	return true, 0
}

func (a *authenticator) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ok, code := a.check(c.Request())
		if ok {
			return next(c)
		}
		if code == http.StatusTooManyRequests {
			c.Response().Header().Set("Retry-After", "1")
			return c.String(code, "Too many authentication attempts; retry later\n")
		}
		c.Response().Header().Set("WWW-Authenticate", `Basic realm="appliance"`)
		return c.String(http.StatusUnauthorized, "Unauthorized\n")
	}
}
