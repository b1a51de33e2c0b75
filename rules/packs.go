package rules

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// packs are the embedded rule packs, one file per pack:
// packs/<name>.yml. A pack is added by adding its file; nothing else lists
// them (`appliance check` and the command's loading check rule_packs
// against PackNames).
//
//go:embed packs/*.yml
var packs embed.FS

// PackNames returns the names of the embedded packs, sorted.
func PackNames() []string {
	entries, _ := fs.ReadDir(packs, "packs")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yml"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Pack returns the text of an embedded pack.
func Pack(name string) ([]byte, bool) {
	data, err := packs.ReadFile("packs/" + name + ".yml")
	return data, err == nil
}

// alwaysOn are the packs loaded whatever rule_packs says: the appliance's
// alerts about itself (disk full, samples not stored).
const alwaysOn = "appliance"

// withDefaultPacks is names with the always-on packs added.
func withDefaultPacks(names []string) []string {
	if slices.Contains(names, alwaysOn) {
		return names
	}
	return append(slices.Clone(names), alwaysOn)
}
