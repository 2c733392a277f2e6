// Package codesize measures the Go code of the repository as a reader
// meets it: the lines of each file, and of each function without the
// lines of its tables.
package codesize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// tableLines is how many lines a composite literal spans, braces
// included, from which it is a table: data a reader scans, not code.
const tableLines = 5

// Piece is a file or a function and its length in lines.
type Piece struct {
	Path     string
	Function string // empty for a file
	Lines    int
}

// Measure returns every non-generated Go file under roots with its
// lines, and every function with its lines less those of its tables.
func Measure(roots ...string) ([]Piece, error) {
	var files, funcs []Piece
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || generated(path) {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			files = append(files, Piece{Path: path, Lines: fset.Position(f.End()).Line})
			for _, decl := range f.Decls {
				if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
					funcs = append(funcs, Piece{Path: path, Function: fd.Name.Name, Lines: functionLines(fset, fd)})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return append(files, funcs...), nil
}

// generated tells the files generated without the standard header too:
// controller-gen's deepcopy, and test data.
func generated(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "zz_generated") || strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator))
}

// functionLines are fd's lines, less the inner lines of its tables.
func functionLines(fset *token.FileSet, fd *ast.FuncDecl) int {
	table := map[int]bool{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		first, last := fset.Position(lit.Lbrace).Line, fset.Position(lit.Rbrace).Line
		if last-first+1 < tableLines {
			return true
		}
		for l := first + 1; l < last; l++ {
			table[l] = true
		}
		return false
	})
	return fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1 - len(table)
}
