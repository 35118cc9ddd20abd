// Package sqlfile loads the queries that packages keep as embedded .sql
// files (one query per file, its header comment naming it).
package sqlfile

import (
	"fmt"
	"io/fs"
)

// Must returns sql/<name>.sql from fsys; a missing file is a build mistake.
func Must(fsys fs.FS, name string) string {
	b, err := fs.ReadFile(fsys, "sql/"+name+".sql")
	if err != nil {
		panic(fmt.Sprintf("missing embedded query %s: %v", name, err))
	}
	return string(b)
}
