// Package packaging_test checks what ships a delayq: scripts/release.sh's
// binaries, the Containerfile's image and the systemd unit, each with the
// real tool (the Go toolchain, podman, systemd-analyze). The config files
// here are checked by internal/cli's TestExampleConfigFiles.
package packaging_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// testVersion is what the tests stamp; the revision is the checkout's.
const testVersion = "v0.0.0-releasetest"

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
	releaseLog  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseDir != "" {
		os.RemoveAll(filepath.Dir(releaseDir))
	}
	os.Exit(code)
}

// release runs scripts/release.sh once for every test of the package
// (it builds two whole binaries) and returns its output directory.
func release(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds release binaries for two platforms")
	}
	releaseOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "delayq-release-")
		if err != nil {
			releaseErr = err
			return
		}
		releaseDir = filepath.Join(tmp, "dist")
		cmd := exec.Command("bash", "../scripts/release.sh", releaseDir)
		cmd.Env = append(os.Environ(), "VERSION="+testVersion)
		releaseLog, releaseErr = cmd.CombinedOutput()
	})
	if releaseErr != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", releaseErr, releaseLog)
	}
	return releaseDir
}

func gitRevision(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestReleaseBinaries: static linux binaries for amd64 and arm64, built
// without cgo and with -trimpath, stamped with the version and the
// revision, listed with correct sums; each one's --version is run (the
// other architecture's under qemu-user).
func TestReleaseBinaries(t *testing.T) {
	dir := release(t)
	rev := gitRevision(t)
	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	for _, tc := range []struct {
		arch    string
		machine elf.Machine
	}{{"amd64", elf.EM_X86_64}, {"arm64", elf.EM_AARCH64}} {
		name := "delayq-linux-" + tc.arch
		path := filepath.Join(dir, name)
		t.Run(tc.arch, func(t *testing.T) {
			if got, want := sums[name], fileSHA256(t, path); got != want {
				t.Errorf("SHA256SUMS says %s for %s, the file's sum is %s", got, name, want)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != tc.machine {
				t.Errorf("%s is for %v, want %v", name, f.Machine, tc.machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("%s has a %v program header: not static", name, p.Type)
				}
			}
			bi, err := buildinfo.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			settings := map[string]string{}
			for _, s := range bi.Settings {
				settings[s.Key] = s.Value
			}
			if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOARCH"] != tc.arch {
				t.Errorf("%s built with %v, want CGO_ENABLED=0, -trimpath, GOARCH=%s", name, settings, tc.arch)
			}
			// With -trimpath the toolchain does not record -ldflags, so
			// the stamp is looked for in the binary's data, where -X
			// puts the strings --version prints.
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{testVersion, rev} {
				if !bytes.Contains(data, []byte(want)) {
					t.Errorf("%s does not hold the stamp %q", name, want)
				}
			}
			wantVersion := fmt.Sprintf("delayq %s (revision %s, ", testVersion, rev[:12])
			argv := []string{path, "--version"}
			if tc.arch != runtime.GOARCH {
				// A static binary runs under qemu's user-mode emulator
				// as it is (no binfmt, no root), so each binary's
				// --version is run, not only the native one's.
				emu := "qemu-" + map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[tc.arch]
				qemu, err := exec.LookPath(emu)
				if err != nil {
					if os.Getenv("CI") == "true" {
						t.Fatalf("%s not found; scripts/deps.sh installs Debian's qemu-user to run %s --version", emu, name)
					}
					t.Skipf("%s not found (Debian's qemu-user, as scripts/deps.sh installs): %s --version not run; its stamp was found in its data above", emu, name)
				}
				argv = append([]string{qemu}, argv...)
			}
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), wantVersion) {
				t.Errorf("%s --version = %q, %v; want %q...", strings.Join(argv, " "), out, err, wantVersion)
			}
		})
	}
	if v, err := os.ReadFile(filepath.Join(dir, "VERSION")); err != nil || strings.TrimSpace(string(v)) != testVersion {
		t.Errorf("VERSION = %q, %v; want %s", v, err, testVersion)
	}
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// need finds a tool the test cannot do without: under CI (where
// scripts/deps.sh installed it) its absence fails the test, elsewhere it
// skips with the reason.
func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found; scripts/deps.sh installs Debian's %s", tool, pkg)
		}
		t.Skipf("%s not found (install Debian's %s, as scripts/deps.sh does)", tool, pkg)
	}
	return path
}

// TestContainerImage builds the Containerfile from the release's context
// with podman, for both architectures, and checks the image without
// running it: entrypoint, user, ports, volume, version label, and the files (the
// entrypoint is the release binary, byte for byte; CA certificates; the
// user in /etc/passwd; no shell).
func TestContainerImage(t *testing.T) {
	podman := need(t, "podman", "podman")
	dir := release(t)
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			tag := fmt.Sprintf("localhost/delayq-test:%s-%d", arch, os.Getpid())
			build := exec.Command(podman, "build", "--platform", "linux/"+arch, "-f", "../Containerfile", "--build-arg", "VERSION="+testVersion, "-t", tag, filepath.Join(dir, "container"))
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("podman build: %v\n%s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command(podman, "rmi", "-f", tag).Run() })

			out, err := exec.Command(podman, "image", "inspect", tag).Output()
			if err != nil {
				t.Fatalf("podman image inspect: %v", err)
			}
			var images []struct {
				Architecture string
				Config       struct {
					User         string
					Entrypoint   []string
					Cmd          []string
					ExposedPorts map[string]struct{}
					Volumes      map[string]struct{}
					WorkingDir   string
					Labels       map[string]string
				}
			}
			if err := json.Unmarshal(out, &images); err != nil || len(images) != 1 {
				t.Fatalf("podman image inspect: %v\n%s", err, out)
			}
			img := images[0]
			if img.Architecture != arch {
				t.Errorf("architecture %q, want %s", img.Architecture, arch)
			}
			if got := strings.Join(img.Config.Entrypoint, " "); got != "/usr/local/bin/delayq" {
				t.Errorf("entrypoint %q, want /usr/local/bin/delayq", got)
			}
			if got := img.Config.Labels["org.opencontainers.image.version"]; got != testVersion {
				t.Errorf("label org.opencontainers.image.version %q, want %s (--build-arg VERSION)", got, testVersion)
			}
			if img.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532 (delayq, not root)", img.Config.User)
			}
			if got := strings.Join(img.Config.Cmd, " "); got != "serve --config /etc/delayq/delayq.toml" {
				t.Errorf("cmd %q", got)
			}
			for _, port := range []string{"7480/tcp", "11300/tcp"} {
				if _, ok := img.Config.ExposedPorts[port]; !ok {
					t.Errorf("port %s not exposed: %v", port, img.Config.ExposedPorts)
				}
			}
			if _, ok := img.Config.Volumes["/data"]; !ok {
				t.Errorf("no /data volume: %v", img.Config.Volumes)
			}

			files := imageFiles(t, podman, tag)
			if got, want := files["usr/local/bin/delayq"].sum, fileSHA256(t, filepath.Join(dir, "delayq-linux-"+arch)); got != want {
				t.Errorf("the entrypoint's sha256 is %q, the release binary's %s", got, want)
			}
			if f := files["etc/ssl/certs/ca-certificates.crt"]; !bytes.Contains(f.data, []byte("BEGIN CERTIFICATE")) {
				t.Errorf("no CA certificates in the image (HTTPS webhooks need them)")
			}
			if !regexp.MustCompile(`(?m)^delayq:x:65532:65532:`).Match(files["etc/passwd"].data) {
				t.Errorf("/etc/passwd lacks the delayq user 65532:\n%s", files["etc/passwd"].data)
			}
			if f, ok := files["data"]; !ok || f.uid != 65532 {
				t.Errorf("/data is missing or not owned by 65532 (%+v)", f)
			}
			for _, shell := range []string{"bin/sh", "usr/bin/sh", "bin/bash", "usr/local/go/bin/go"} {
				if _, ok := files[shell]; ok {
					t.Errorf("the image has %s: it should hold the binary only", shell)
				}
			}

			// Running it is the last check, and the one this sandbox may
			// not allow: say so instead of skipping in silence.
			run, err := exec.Command(podman, "run", "--rm", "--platform", "linux/"+arch, tag, "--version").CombinedOutput()
			switch {
			case err != nil && arch != runtime.GOARCH:
				t.Logf("podman run of the %s image cannot run on this %s machine (%v: %s); it was checked by inspect and by its files above",
					arch, runtime.GOARCH, err, strings.TrimSpace(string(run)))
			case err != nil:
				t.Logf("podman run cannot start containers in this sandbox (%v: %s); the image was checked by inspect and by its files above instead",
					err, strings.TrimSpace(string(run)))
			case !strings.HasPrefix(string(run), "delayq "+testVersion):
				t.Errorf("podman run %s --version = %q, want delayq %s", tag, run, testVersion)
			}
		})
	}
}

type imageFile struct {
	sum  string
	data []byte // small files only
	uid  int
}

// imageFiles reads the image's layers (podman save) into path → file.
func imageFiles(t *testing.T, podman, tag string) map[string]imageFile {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	if out, err := exec.Command(podman, "save", "--format", "docker-archive", "-o", archive, tag).CombinedOutput(); err != nil {
		t.Fatalf("podman save: %v\n%s", err, out)
	}
	outer := readTar(t, archive)
	var manifest []struct{ Layers []string }
	if err := json.Unmarshal(outer["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v", err)
	}
	files := map[string]imageFile{}
	for _, layer := range manifest[0].Layers {
		f, ok := outer[layer]
		if !ok {
			t.Fatalf("layer %s missing from the archive", layer)
		}
		tr := tar.NewReader(bytes.NewReader(f.data))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			s := sha256.Sum256(data)
			name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
			files[name] = imageFile{sum: hex.EncodeToString(s[:]), data: data, uid: h.Uid}
		}
	}
	return files
}

func readTar(t *testing.T, path string) map[string]imageFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]imageFile{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = imageFile{data: data, uid: h.Uid}
	}
}

// TestSystemdUnit runs systemd-analyze verify on packaging/delayq.service
// (with ExecStart pointed at a real delayq binary, which verify requires
// to exist) and wants no complaint at all, and checks that the unit and
// the config file it names agree.
func TestSystemdUnit(t *testing.T) {
	analyze := need(t, "systemd-analyze", "systemd")
	dir := release(t)
	unit, err := os.ReadFile("delayq.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "ProtectSystem=strict", "StateDirectory=delayq",
		"NoNewPrivileges=yes", "DynamicUser=yes", "ExecStart=/usr/local/bin/delayq serve --config /etc/delayq/delayq.toml"} {
		if !bytes.Contains(unit, []byte("\n"+want)) {
			t.Errorf("delayq.service lacks %s", want)
		}
	}
	// The file the unit reads is packaging/delayq.toml, installed to
	// /etc/delayq; its data-dir is the unit's StateDirectory.
	conf, err := os.ReadFile("delayq.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(conf, []byte("\ndata-dir = \"/var/lib/delayq\"\n")) {
		t.Errorf("delayq.toml's data-dir is not /var/lib/delayq, the unit's StateDirectory")
	}

	bin := filepath.Join(dir, "delayq-linux-"+runtime.GOARCH)
	tmp := filepath.Join(t.TempDir(), "delayq.service")
	if err := os.WriteFile(tmp, bytes.ReplaceAll(unit, []byte("/usr/local/bin/delayq"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", tmp).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify delayq.service: %v\n%s", err, out)
	}

	// A broken unit fails the same check: the check can fail.
	broken := filepath.Join(t.TempDir(), "delayq.service")
	if err := os.WriteFile(broken, append(unit, "\n[Service]\nProtectSystem=bogus\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", "--man=no", broken).CombinedOutput(); !bytes.Contains(out, []byte("bogus")) {
		t.Errorf("systemd-analyze verify of a broken unit said %q, want a complaint about it", out)
	}
}
