package main

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tests' operator image is the Dockerfile's last stage on programs built
// on the host (hack/images.sh), so no test builds the Dockerfile's builder
// stage: this checks what it needs. Its go build line builds the four
// programs, each copied into the image under its name; its COPY lines bring
// every folder of this module those programs compile from, and
// .dockerignore leaves them in the build context.
func TestDockerfile(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ignoreRaw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	d := parseDockerfile(string(raw))
	programs := []string{"./cmd", "./cmd/reloader", "./cmd/discovery", "./cmd/warm"}
	if !slices.Equal(d.programs, programs) {
		t.Errorf("the builder stage builds %q, want %q", d.programs, programs)
	}
	for _, want := range []string{"/workspace/bin/manager", "/workspace/bin/reloader", "/workspace/bin/discovery", "/workspace/bin/warm"} {
		if !slices.Contains(d.imageFiles, want) {
			t.Errorf("the last stage does not copy %s from the builder stage (it copies %q)", want, d.imageFiles)
		}
	}

	list := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}"}, programs...)...)
	list.Dir = root
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var dirs []string
	for dir := range strings.FieldsSeq(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	if len(dirs) < 10 {
		t.Fatalf("go list found only %q: not the module's packages", dirs)
	}
	for _, dir := range dirs {
		if !d.copies(dir) {
			t.Errorf("the programs compile %s/, which the builder stage does not copy (it copies %q)", dir, d.sources)
		}
		if ignored(strings.Fields(string(ignoreRaw)), dir) {
			t.Errorf("the programs compile %s/, which .dockerignore leaves out of the build context", dir)
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if !d.copies(f) {
			t.Errorf("the builder stage does not copy %s", f)
		}
	}
}

// A Dockerfile missing what the programs need fails the check.
func TestDockerfileCheckFindsWhatIsMissing(t *testing.T) {
	d := parseDockerfile(`FROM golang:1.27 AS builder
WORKDIR /workspace
COPY go.mod go.sum ./
COPY api/ api/
COPY cmd/ cmd/
RUN CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd ./cmd/warm && \
    mv bin/cmd bin/manager

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /workspace/bin/manager /workspace/bin/warm ./
`)
	if want := []string{"./cmd", "./cmd/warm"}; !slices.Equal(d.programs, want) {
		t.Errorf("programs %q, want %q", d.programs, want)
	}
	if want := []string{"/workspace/bin/manager", "/workspace/bin/warm"}; !slices.Equal(d.imageFiles, want) {
		t.Errorf("image files %q, want %q", d.imageFiles, want)
	}
	if !d.copies("cmd/warm") || !d.copies("api/v1alpha1") || !d.copies("go.sum") {
		t.Errorf("copies cmd/warm, api/v1alpha1 and go.sum, found %q", d.sources)
	}
	if d.copies("pkg/desired") || d.copies("applyconfig") {
		t.Errorf("pkg/ and applyconfig/ are not copied, found %q", d.sources)
	}
	if !ignored([]string{"bin/", "hack/"}, "hack/tools") || ignored([]string{"bin/", "hack/"}, "pkg/hack") {
		t.Error(".dockerignore's folders are matched wrong")
	}
}

type dockerfile struct {
	// sources are what the builder stage copies, relative to the context.
	sources []string
	// programs are the packages its go build line builds.
	programs []string
	// imageFiles are what the last stage copies from the builder stage.
	imageFiles []string
}

func parseDockerfile(text string) dockerfile {
	var d dockerfile
	text = strings.ReplaceAll(text, "\\\n", " ")
	stage := 0
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "FROM":
			stage++
		case f[0] == "COPY" && stage == 1 && len(f) > 2:
			d.sources = append(d.sources, f[1:len(f)-1]...)
		case f[0] == "COPY" && stage > 1 && len(f) > 3 && f[1] == "--from=builder":
			d.imageFiles = append(d.imageFiles, f[2:len(f)-1]...)
		case f[0] == "RUN" && stage == 1 && slices.Contains(f, "build"):
			for _, w := range f[slices.Index(f, "build")+1:] {
				if w == "&&" {
					break
				}
				if strings.HasPrefix(w, "./") {
					d.programs = append(d.programs, w)
				}
			}
		}
	}
	return d
}

// copies tells whether the builder stage copies the file or folder p.
func (d dockerfile) copies(p string) bool {
	for _, s := range d.sources {
		s = strings.TrimSuffix(path.Clean(s), "/")
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// ignored tells whether .dockerignore's patterns (folders, as this
// project's are) leave p out.
func ignored(patterns []string, p string) bool {
	for _, pat := range patterns {
		pat = strings.TrimSuffix(path.Clean(pat), "/")
		if p == pat || strings.HasPrefix(p, pat+"/") {
			return true
		}
	}
	return false
}

// The builder stage builds with exactly the toolchain go.mod names, whatever
// Go its base image's tag holds.
func TestTheDockerfileBuildsWithGoModsToolchain(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	toolchain := ""
	for line := range strings.Lines(string(gomod)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "toolchain "); ok {
			toolchain = v
		}
	}
	if toolchain == "" {
		t.Fatal("go.mod names no toolchain")
	}
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\nENV GOTOOLCHAIN="+toolchain+"\n") {
		t.Errorf("the Dockerfile does not set GOTOOLCHAIN=%s, go.mod's toolchain", toolchain)
	}
}
