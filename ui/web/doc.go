// Package web embeds the dashboard's single-page app (Preact + htm +
// uPlot, bundled by esbuild from src/ into dist/ by `make build`) and
// serves it.
//
// dist/ is tracked with only a .keep file, so `go build`, `go vet` and
// `go test` work on a fresh checkout: without a built bundle every page
// answers a short HTML page saying "bundle not built, run make build".
// No built file or third-party code is committed; dist/* except .keep is
// ignored by git.
package web
