package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// CSP is the Content-Security-Policy of every page and asset: the app
// loads nothing from outside the appliance's origin (no CDN, no web font,
// no inline script).
const CSP = "default-src 'self'"

// Pages are the app's paths (a trailing * any path below it, as
// /pipeline/<name>); each serves index.html and the app routes on
// location.pathname.
var Pages = []string{"/", "/model", "/probes", "/hardware", "/targets", "/alerts", "/explore", "/slo", "/reports", "/compare", "/cardinality", "/pipeline", "/pipeline/*"}

// Built reports whether the bundle was built into dist/.
func Built() bool {
	_, err := fs.Stat(dist, "dist/index.html")
	return err == nil
}

// notBuilt is every page when dist/ holds no bundle.
const notBuilt = `<!doctype html><html><head><meta charset="utf-8"><title>Appliance</title></head>
<body><h1>Dashboard bundle not built</h1><p>This binary was built without the dashboard.
Run <code>make build</code> (npm ci + esbuild, then go build) to embed it.
The API under <code>/api/v1/</code> works either way.</p></body></html>
`

// Handler serves the app: the pages answer index.html, /assets/<file>
// the bundle's files (pre-gzipped copies when the client accepts gzip).
func Handler() http.Handler {
	sub, _ := fs.Sub(dist, "dist")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", CSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !Built() {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			if strings.HasPrefix(r.URL.Path, "/assets/") {
				w.WriteHeader(http.StatusNotFound)
			}
			_, _ = w.Write([]byte(notBuilt))
			return
		}
		name := "index.html"
		if rest, ok := strings.CutPrefix(r.URL.Path, "/assets/"); ok {
			name = path.Clean(rest)
			if name == "index.html" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".gz") {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
		} else {
			w.Header().Set("Cache-Control", "no-store")
		}
		serve(w, r, sub, name)
	})
}

// serve writes one file, its .gz twin when there is one and the client
// takes gzip.
func serve(w http.ResponseWriter, r *http.Request, fsys fs.FS, name string) {
	ctype := map[string]string{
		".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8", ".svg": "image/svg+xml",
	}[path.Ext(name)]
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Add("Vary", "Accept-Encoding")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		if b, err := fs.ReadFile(fsys, name+".gz"); err == nil {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(b)
			return
		}
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(b)
}

// Index is the built index.html, nil without a bundle.
func Index() []byte {
	b, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		return nil
	}
	return b
}
