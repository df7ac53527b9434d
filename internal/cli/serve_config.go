package cli

// The --config file of `delayq serve` (docs/operations.md, "Config file").
//
// The file's keys are not declared anywhere: they are the serve command's
// flags as kong knows them (name, type, enum, env variables), so a flag
// added to serveCmd or its embedded groups is a key with no further work,
// and a key is parsed by the very mapper that parses the flag. The file
// is applied as a kong resolver, added in serveCmd's BeforeResolve hook
// once the command line has named the file; kong's resolvers fill only
// flags the command line did not set, and ours also leaves alone a flag
// whose environment variable is set, which gives the documented order:
// flag > environment (DELAYQ_*) > file > default.

import (
	"encoding"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/redact"
)

// configFlagName and checkFlagName are serve's own flags about the file;
// they are not keys of it (a file naming another file, or asking to be
// checked, would be a loop or a surprise).
const (
	configFlagName = "config"
	checkFlagName  = "check"
)

// maxConfigBytes bounds the file read: a settings file is a few KiB, and
// a path pointed at a device or a huge log must fail fast, not eat memory.
const maxConfigBytes = 1 << 20

// configEntry is one key of the file: its value as the command line would
// spell it (what the flag's mapper parses), and where it was written.
type configEntry struct {
	key  string
	line int
	text string
}

// configFile is a parsed, checked config file.
type configFile struct {
	path    string
	entries map[string]configEntry // by key (= flag name)
	applied map[string]configEntry // the entries that set a flag (no flag or env var won)
	// warning, if not "", is logged at start: the file holds a secret
	// and others may read it.
	warning string
}

// fileFlags returns the flags a config file may set: every flag of the
// serve command (embedded groups included), less --config and --check.
func fileFlags(serve *kong.Node) map[string]*kong.Flag {
	flags := make(map[string]*kong.Flag)
	for _, f := range serve.Flags {
		if f.Name == configFlagName || f.Name == checkFlagName {
			continue
		}
		flags[f.Name] = f
	}
	return flags
}

// readConfigFile reads and parses the file at path against flags.
func readConfigFile(path string, flags map[string]*kong.Flag) (*configFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s: config file larger than %d bytes", path, maxConfigBytes)
	}
	cf, err := parseConfigFile(path, data, flags)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o044 != 0 {
		if key := cf.secretKey(flags); key != "" {
			cf.warning = fmt.Sprintf("%s holds a secret (%s) and is readable by its group or by everyone (mode %04o); chmod 600 it", path, key, fi.Mode().Perm())
		}
	}
	return cf, nil
}

// secretKey names a key of the file that holds a secret (a secret flag,
// or a value with a password in it), or "".
func (cf *configFile) secretKey(flags map[string]*kong.Flag) string {
	keys := make([]string, 0, len(cf.entries))
	for k := range cf.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := cf.entries[k]
		if e.text != "" && (isSecret(flags[k]) || redact.String(e.text) != e.text) {
			return k
		}
	}
	return ""
}

// parseConfigFile parses data (TOML) and checks every key and value
// against flags. It reports every problem at once, each as
// "path:line: key: what is wrong", so an operator fixes a file in one
// round.
func parseConfigFile(path string, data []byte, flags map[string]*kong.Flag) (*configFile, error) {
	// go-toml's decoder checks the whole document (syntax, duplicate keys,
	// value forms) and reports the line of the first problem.
	var values map[string]any
	if err := toml.Unmarshal(data, &values); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			msg := strings.TrimPrefix(de.Error(), "toml: ")
			if key := strings.Join(de.Key(), "."); key != "" {
				msg = key + ": " + msg
			}
			return nil, fmt.Errorf("%s:%d:%d: %s", path, line, col, msg)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	// Its parser, over the same bytes, says where each key is written.
	var (
		errs []error
		cf   = &configFile{path: path, entries: make(map[string]configEntry), applied: make(map[string]configEntry)}
		p    unstable.Parser
	)
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: "+format, append([]any{path, line}, args...)...))
	}
	p.Reset(data)
	inTable := false // the keys after a table header are the table's
	for p.NextExpression() {
		expr := p.Expression()
		switch expr.Kind {
		case unstable.Table, unstable.ArrayTable:
			key, line := nodeKey(&p, expr)
			fail(line, "[%s]: tables are not settings: write every setting as a top-level key (the serve flag's name)", key)
			inTable = true
			continue
		case unstable.KeyValue:
			if inTable {
				continue // part of the table refused above: one error, not a second about its keys
			}
		default:
			continue
		}
		key, line := nodeKey(&p, expr)
		if strings.Contains(key, ".") {
			fail(line, "%s: dotted keys are not settings: write every setting as a top-level key (the serve flag's name)", key)
			continue
		}
		flag, ok := flags[key]
		if !ok {
			fail(line, "%s: unknown key%s", key, suggest(key, flags))
			continue
		}
		text, err := flagText(flag, values[key])
		if err == nil {
			err = checkFlagText(flag, text)
		}
		if err != nil {
			fail(line, "%s: %v", key, err)
			continue
		}
		cf.entries[key] = configEntry{key: key, line: line, text: text}
	}
	if err := p.Error(); err != nil {
		// Unreachable after a successful Unmarshal of the same bytes;
		// kept so a disagreement between the two is an error, not a
		// silently ignored key.
		errs = append(errs, fmt.Errorf("%s: %v", path, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cf, nil
}

// nodeKey returns the (possibly dotted) key of a KeyValue or table
// expression and the line it starts on.
func nodeKey(p *unstable.Parser, expr *unstable.Node) (string, int) {
	var parts []string
	line := 0
	it := expr.Key()
	for it.Next() {
		n := it.Node()
		parts = append(parts, string(n.Data))
		if line == 0 && n.Raw.Length > 0 {
			line = p.Shape(n.Raw).Start.Line
		}
	}
	if line == 0 {
		line = p.Shape(expr.Raw).Start.Line
	}
	return strings.Join(parts, "."), line
}

// suggest names the closest known key, for a typo such as http_addr.
func suggest(key string, flags map[string]*kong.Flag) string {
	norm := strings.ReplaceAll(strings.ToLower(key), "_", "-")
	if _, ok := flags[norm]; ok {
		return fmt.Sprintf(" (did you mean %s?)", norm)
	}
	best, bestD := "", 3
	for name := range flags {
		if d := editDistance(norm, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return " (the keys are the flags of `delayq serve --help`)"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var durationType = reflect.TypeFor[time.Duration]()

// flagText turns a TOML value into the text the flag takes on the command
// line, refusing a TOML type that cannot be meant for the flag: a quoted
// number for an int flag is a typo worth an error, as is a bare number
// for a duration (seconds? milliseconds?).
func flagText(flag *kong.Flag, v any) (string, error) {
	t := flag.Target.Type()
	if t.Kind() == reflect.Slice {
		switch v := v.(type) {
		case []any:
			parts := make([]string, len(v))
			for i, el := range v {
				s, err := scalarText(t.Elem(), el)
				if err != nil {
					return "", fmt.Errorf("element %d: %w", i+1, err)
				}
				if flag.Tag.Sep == -1 && len(v) > 1 {
					return "", errors.New("takes a single value")
				}
				// kong splits the flag's text at its separator, honouring
				// a backslash before it.
				if flag.Tag.Sep != -1 {
					s = strings.ReplaceAll(s, `\`, `\\`)
					s = strings.ReplaceAll(s, string(flag.Tag.Sep), `\`+string(flag.Tag.Sep))
				}
				parts[i] = s
			}
			sep := ","
			if flag.Tag.Sep != -1 {
				sep = string(flag.Tag.Sep)
			}
			return strings.Join(parts, sep), nil
		case string:
			return v, nil // as on the command line: "a,b"
		}
		return "", fmt.Errorf("expected an array (or a %s-separated string), got %s", sepName(flag), tomlType(v))
	}
	return scalarText(t, v)
}

func sepName(flag *kong.Flag) string {
	if flag.Tag.Sep == -1 {
		return "single"
	}
	return strconv.QuoteRune(flag.Tag.Sep)
}

// textType says whether values of t read their command-line text
// themselves (encoding.TextUnmarshaler, as kong honours): such a flag's
// key takes that text as a TOML string, whatever the type's kind.
func textType(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(textUnmarshalerType)
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// scalarText is flagText for one value of type t.
func scalarText(t reflect.Type, v any) (string, error) {
	if t == durationType || textType(t) {
		if s, ok := v.(string); ok {
			return s, nil
		}
		if t == durationType {
			return "", fmt.Errorf("expected a duration string such as \"30s\", \"1h30m\" or \"7d\", got %s", tomlType(v))
		}
		return "", fmt.Errorf("expected a string (the flag's command-line text), got %s", tomlType(v))
	}
	switch t.Kind() {
	case reflect.Bool:
		if b, ok := v.(bool); ok {
			return strconv.FormatBool(b), nil
		}
		return "", fmt.Errorf("expected true or false, got %s", tomlType(v))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, ok := v.(int64); ok {
			return strconv.FormatInt(n, 10), nil
		}
		return "", fmt.Errorf("expected an integer, got %s", tomlType(v))
	case reflect.Float32, reflect.Float64:
		switch n := v.(type) {
		case int64:
			return strconv.FormatInt(n, 10), nil
		case float64:
			return strconv.FormatFloat(n, 'g', -1, 64), nil
		}
		return "", fmt.Errorf("expected a number, got %s", tomlType(v))
	case reflect.String:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", fmt.Errorf("expected a string, got %s", tomlType(v))
	}
	// A flag of a type this file does not know (a custom mapper): its
	// command-line text, from a TOML string.
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", fmt.Errorf("expected a string (the flag's command-line text), got %s", tomlType(v))
}

// tomlType names the TOML type of a decoded value, for errors.
func tomlType(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the float %g", v)
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a date or time (%v)", v)
}

// checkFlagText parses text with the flag's own mapper into a scratch
// value, and checks an enum flag's choices, so a bad value is reported
// with the file's line instead of later, by kong, without it.
func checkFlagText(flag *kong.Flag, text string) error {
	if text == "" && isPathFlag(flag) {
		return nil // not set (see resolver)
	}
	target := reflect.New(flag.Target.Type()).Elem()
	scan := kong.ScanFromTokens(kong.Token{Type: kong.FlagValueToken, Value: text})
	if err := flag.Mapper.Decode(&kong.DecodeContext{Value: flag.Value, Scan: scan}, target); err != nil {
		return err
	}
	if flag.Enum != "" {
		choices := flag.EnumSlice()
		if !slices.Contains(choices, fmt.Sprint(target.Interface())) {
			return fmt.Errorf("%q is not one of %s", text, strings.Join(choices, ", "))
		}
	}
	return nil
}

// resolver applies the file to the flags neither the command line nor the
// environment set.
func (cf *configFile) resolver() kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		e, ok := cf.entries[flag.Name]
		if !ok || envSet(flag) != "" {
			return nil, nil
		}
		if e.text == "" && isPathFlag(flag) {
			// kong's path mapper makes "" the current directory; in a
			// file (and in --check's output) "" means not set.
			return nil, nil
		}
		cf.applied[flag.Name] = e
		return e.text, nil
	})
}

// isPathFlag says whether kong maps the flag's text as a file path.
func isPathFlag(flag *kong.Flag) bool {
	switch flag.Tag.Type {
	case "path", "existingfile", "existingdir":
		return true
	}
	return false
}

// envSet returns the name of the flag's environment variable that is set,
// or "". kong reads a set variable even when it is empty, so this does.
func envSet(flag *kong.Flag) string {
	for _, name := range flag.Envs {
		if _, ok := os.LookupEnv(name); ok {
			return name
		}
	}
	return ""
}

// BeforeResolve is kong's hook between reading the command line and
// applying resolvers: the command line (or DELAYQ_CONFIG) has named the
// file, which is read, checked and added as a resolver.
func (c *serveCmd) BeforeResolve(kctx *kong.Context) error {
	var serve *kong.Node
	for _, p := range kctx.Path {
		if p.Command != nil && p.Command.Name == "serve" {
			serve = p.Command
		}
	}
	if serve == nil {
		return nil
	}
	var path string
	for _, f := range serve.Flags {
		if f.Name == configFlagName {
			path, _ = kctx.FlagValue(f).(string)
		}
	}
	if path == "" {
		return nil
	}
	cf, err := readConfigFile(path, fileFlags(serve))
	if err != nil {
		return err
	}
	c.file = cf
	kctx.AddResolver(cf.resolver())
	return nil
}

// setting is one effective serve setting and where it came from.
type setting struct {
	key    string
	value  string // TOML, secrets masked
	source string // "flag", "env DELAYQ_X", "file:line", "default"
}

// settings lists every setting a config file may hold, in the order of
// `delayq serve --help`, with its effective value and source.
func (c *serveCmd) settings(kctx *kong.Context) []setting {
	onCommandLine := make(map[*kong.Flag]bool)
	var serve *kong.Node
	for _, p := range kctx.Path {
		if p.Flag != nil && !p.Resolved {
			onCommandLine[p.Flag] = true
		}
		if p.Command != nil && p.Command.Name == "serve" {
			serve = p.Command
		}
	}
	var out []setting
	for _, f := range serve.Flags {
		if f.Name == configFlagName || f.Name == checkFlagName {
			continue
		}
		s := setting{key: f.Name, value: tomlValue(f, f.Target), source: "default"}
		switch e, fromFile := c.applied(f.Name); {
		case onCommandLine[f]:
			s.source = "flag"
		case envSet(f) != "":
			s.source = "env " + envSet(f)
		case fromFile:
			s.source = fmt.Sprintf("%s:%d", c.file.path, e.line)
		}
		out = append(out, s)
	}
	return out
}

// applied returns the file's entry for key if the file set that flag.
func (c *serveCmd) applied(key string) (configEntry, bool) {
	if c.file == nil {
		return configEntry{}, false
	}
	e, ok := c.file.applied[key]
	return e, ok
}

// writeSettings prints settings as a TOML file with each source as a
// comment: the output of --check is itself a valid config file (with
// secrets masked).
func writeSettings(w io.Writer, settings []setting) {
	fmt.Fprintln(w, "# delayq serve: effective settings (flag > environment > file > default); secrets masked")
	width := 0
	for _, s := range settings {
		width = max(width, len(s.key)+3+len(s.value))
	}
	for _, s := range settings {
		line := s.key + " = " + s.value
		fmt.Fprintf(w, "%-*s  # %s\n", width, line, s.source)
	}
}

// maskedValue stands for a secret in --check's output.
const maskedValue = `"********"`

// isSecret says whether a flag holds a secret that --check must not print:
// a flag tagged secret:"true", or one whose name says it is (token,
// password, secret, credential), or the inline auth document.
func isSecret(f *kong.Flag) bool {
	if f.Tag.Get("secret") == "true" {
		return true
	}
	return secretName(f.Name) || f.Name == "auth"
}

// secretName says whether a name (of a flag, of a URL parameter) says
// that its value is a secret.
func secretName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range []string{"token", "password", "passwd", "secret", "credential"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// tomlValue formats a flag's value as TOML, masking secrets: the whole
// value of a secret flag, the password of any URL.
func tomlValue(f *kong.Flag, v reflect.Value) string {
	if isSecret(f) && !v.IsZero() {
		return maskedValue
	}
	return tomlOf(v)
}

func tomlOf(v reflect.Value) string {
	if v.Type() == durationType {
		return tomlString(time.Duration(v.Int()).String())
	}
	if textType(v.Type()) {
		// Written as the flag takes it: the type's own text.
		if m, ok := v.Interface().(encoding.TextMarshaler); ok {
			if b, err := m.MarshalText(); err == nil {
				return tomlString(redact.String(string(b)))
			}
		}
		if s, ok := v.Interface().(fmt.Stringer); ok {
			return tomlString(redact.String(s.String()))
		}
	}
	switch v.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return tomlFloat(v.Float())
	case reflect.String:
		return tomlString(redact.String(v.String()))
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = tomlOf(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return tomlString(redact.String(fmt.Sprint(v.Interface())))
}

// tomlFloat writes f so TOML reads it back as a float.
func tomlFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// annotate adds to each of config.Validate's "key: problem" lines where
// the key's value came from: the file and line, or the environment
// variable, so a value that parses but is out of range is found as fast
// as one that does not parse.
func (c *serveCmd) annotate(kctx *kong.Context, err error) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	flags := make(map[string]*kong.Flag)
	for _, f := range kctx.Flags() {
		flags[f.Name] = f
	}
	onCommandLine := make(map[*kong.Flag]bool)
	for _, p := range kctx.Path {
		if p.Flag != nil && !p.Resolved {
			onCommandLine[p.Flag] = true
		}
	}
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := e.Error()
		key, _, _ := strings.Cut(msg, ":")
		if f, ok := flags[key]; ok && !onCommandLine[f] {
			if name := envSet(f); name != "" {
				msg += " (from " + name + ")"
			} else if entry, ok := c.applied(key); ok {
				msg = fmt.Sprintf("%s:%d: %s", c.file.path, entry.line, msg)
			}
		}
		lines = append(lines, msg)
	}
	return strings.Join(lines, "\n")
}

// checkStart is the rest of --check: what the server checks first when it
// starts (listeners exposed without tokens, the tokens themselves), so
// "configuration OK" means it would get as far as opening the store. TLS
// files and Redis are left to the start itself.
func checkStart(e *env, cfg config.Config) error {
	warnings, err := cfg.CheckExposure()
	if err != nil {
		return usageError{msg: "the server would refuse to start:\n" + err.Error()}
	}
	for _, w := range warnings {
		fmt.Fprintln(e.stderr, "delayq serve: warning: insecure listener: "+w)
	}
	if _, err := auth.Load(cfg.AuthFile, cfg.Auth); err != nil {
		return usageError{msg: err.Error()}
	}
	fmt.Fprintln(e.stderr, "delayq serve: configuration OK")
	return nil
}
