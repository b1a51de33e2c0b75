package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"
)

// basicAuth checks HTTP basic credentials against bcrypt hashes, as
// Prometheus' web config does. bcrypt is slow on purpose (tens of ms at cost
// 10), so a verified user/password pair is remembered by its SHA-256 and a
// dashboard polling every few seconds does not pay it each time.
func basicAuth(users map[string]string) echo.MiddlewareFunc {
	var (
		mu   sync.Mutex
		good = map[[32]byte]bool{}
	)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			user, pass, ok := c.Request().BasicAuth()
			if ok {
				hash, known := users[user]
				key := sha256.Sum256([]byte(user + "\x00" + pass + "\x00" + hash))
				mu.Lock()
				cached := good[key]
				mu.Unlock()
				switch {
				case cached:
					return next(c)
				case known && bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass)) == nil:
					mu.Lock()
					if len(good) > 1000 {
						clear(good)
					}
					good[key] = true
					mu.Unlock()
					return next(c)
				case !known:
					// Spend the same time as a wrong password, so user
					// names cannot be probed by timing.
					_ = bcrypt.CompareHashAndPassword([]byte("$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"), []byte(pass))
					_ = subtle.ConstantTimeCompare([]byte(user), []byte(user))
				}
			}
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="appliance"`)
			return c.String(http.StatusUnauthorized, "Unauthorized\n")
		}
	}
}
