package dgramio_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"
)

// apiPackages are the packages a program imports (the root package doc's
// list). Their exported identifiers may mention only each other's types,
// the standard library's and golang.org/x's: never a type of a package
// under internal/ (which no user can name) nor one of gVisor's.
var apiPackages = []string{
	".", "kinds", "metrics", "frameio", "frameio/afxdp", "frameio/memio",
	"frameio/pcapio", "frameio/dpdk", "stack/native", "tcp/netconn",
	"kernel/iouring", "conformance",
}

func TestAPIMentionsNoInternalType(t *testing.T) {
	ctx := build.Default
	ctx.BuildTags = append(ctx.BuildTags, "dpdk")
	for _, dir := range apiPackages {
		pkg, err := ctx.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		fset := token.NewFileSet()
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, path.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range privateMentions(f) {
				t.Errorf("%s: exported %s mentions %s, a type no user can name", fset.Position(bad.pos), bad.decl, bad.what)
			}
		}
	}
}

type mention struct {
	pos  token.Pos
	decl string
	what string
}

// privateMentions returns the exported declarations of f whose signature
// or exported fields name a type of an internal or gVisor package.
func privateMentions(f *ast.File) []mention {
	private := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(p, "/internal") && !strings.HasPrefix(p, "gvisor.dev/") {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		private[name] = p
	}
	if len(private) == 0 {
		return nil
	}
	var out []mention
	check := func(decl string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if _, ok := n.(*ast.FuncLit); ok {
				return false
			}
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok {
				if p, ok := private[id.Name]; ok {
					out = append(out, mention{sel.Pos(), decl, p + "." + sel.Sel.Name})
				}
			}
			return true
		})
	}
	checkFields := func(decl string, fl *ast.FieldList, exportedOnly bool) {
		if fl == nil {
			return
		}
		for _, fld := range fl.List {
			if exportedOnly && len(fld.Names) > 0 && !ast.IsExported(fld.Names[0].Name) {
				continue
			}
			if exportedOnly && len(fld.Names) == 0 {
				// an embedded field is exported when its type name is
				if !ast.IsExported(embeddedName(fld.Type)) {
					continue
				}
			}
			check(decl, fld.Type)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !ast.IsExported(d.Name.Name) {
				continue
			}
			if d.Recv != nil && len(d.Recv.List) > 0 && !ast.IsExported(embeddedName(d.Recv.List[0].Type)) {
				continue
			}
			checkFields(d.Name.Name, d.Type.Params, false)
			checkFields(d.Name.Name, d.Type.Results, false)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !ast.IsExported(s.Name.Name) {
						continue
					}
					switch tt := s.Type.(type) {
					case *ast.StructType:
						checkFields(s.Name.Name, tt.Fields, true)
					case *ast.InterfaceType:
						checkFields(s.Name.Name, tt.Methods, true)
					default:
						check(s.Name.Name, s.Type)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if ast.IsExported(n.Name) {
							check(n.Name, s.Type)
							for _, v := range s.Values {
								if _, isLit := v.(*ast.FuncLit); !isLit {
									checkValueType(check, n.Name, v)
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// checkValueType checks the value of an exported variable or constant
// that is a bare selector (var X = internalpkg.Y exports internalpkg's type).
func checkValueType(check func(string, ast.Node), name string, v ast.Expr) {
	if sel, ok := v.(*ast.SelectorExpr); ok {
		check(name, sel)
	}
}

func embeddedName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return embeddedName(e.X)
	case *ast.IndexListExpr:
		return embeddedName(e.X)
	}
	return ""
}
