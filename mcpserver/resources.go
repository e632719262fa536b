package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

// The resources' URIs: runtimectl://sessions/NAME/history.ipynb (the history as a notebook)
// and runtimectl://sessions/NAME/outputs/FILE (a rich output, a file of the session's outputs
// folder).
const (
	uriPrefix     = "runtimectl://sessions/"
	historyFile   = "history.ipynb"
	outputsFolder = session.Workspace + "/outputs/"
	ipynbType     = "application/x-ipynb+json"
)

// maxResource caps what a resource read returns.
const maxResource = 16 << 20

func historyURI(name string) string { return uriPrefix + name + "/" + historyFile }

// outputURI is the resource of a rich output's file ("" for one outside the outputs folder).
func outputURI(name, p string) string {
	rel, ok := strings.CutPrefix(path.Clean(p), outputsFolder)
	if !ok || rel == "" {
		return ""
	}
	parts := strings.Split(rel, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return uriPrefix + name + "/outputs/" + strings.Join(parts, "/")
}

// parseURI returns the session and what of it a resource URI names: historyFile, or the
// absolute path of an output.
func parseURI(uri string) (name, what string, ok bool) {
	rest, ok := strings.CutPrefix(uri, uriPrefix)
	if !ok {
		return "", "", false
	}
	name, rest, ok = strings.Cut(rest, "/")
	if !ok || session.ValidateName(name) != nil {
		return "", "", false
	}
	if rest == historyFile {
		return name, historyFile, true
	}
	rel, ok := strings.CutPrefix(rest, "outputs/")
	if !ok {
		return "", "", false
	}
	rel, err := url.PathUnescape(rel)
	if err != nil {
		return "", "", false
	}
	p := path.Clean(outputsFolder + rel)
	if !strings.HasPrefix(p, outputsFolder) {
		return "", "", false
	}
	return name, p, true
}

// resources keeps the Server's resource list in step with the sessions the caller sees: each
// one's history, and the outputs of executions run through the Server. Every session's
// resources are readable through the templates, listed or not.
type resources struct {
	s       *Server
	mu      sync.Mutex
	listed  map[string]bool                     // URIs in the list
	outputs map[string]map[string]*mcp.Resource // session -> URI -> output
}

func newResources(s *Server) *resources {
	r := &resources{s: s, listed: map[string]bool{}, outputs: map[string]map[string]*mcp.Resource{}}
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "session-history", Title: "A session's history, as a notebook",
		Description: "Every execution of the session, oldest first, with its code, output, result and rich outputs, as a Jupyter notebook (nbformat 4).",
		URITemplate: uriPrefix + "{name}/" + historyFile, MIMEType: ipynbType,
	}, r.read)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "session-output", Title: "A rich output of a session",
		Description: "A figure, an HTML table or another rich output of an execution, from the session's /workspace/outputs.",
		URITemplate: uriPrefix + "{name}/outputs/{+file}",
	}, r.read)
	return r
}

// loop brings the list up to date every SyncEvery until ctx ends.
func (r *resources) loop(ctx context.Context) {
	for {
		r.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.s.cfg.SyncEvery):
		}
	}
}

// sync lists the history of every session the caller sees, drops the resources of sessions
// that are gone; a change sends notifications/resources/list_changed.
func (r *resources) sync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := r.s.visible(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.s.log.Debug("mcp: list sessions for the resources", "err", err)
		}
		return
	}
	want := map[string]*mcp.Resource{}
	names := map[string]bool{}
	for _, in := range list {
		names[in.Name] = true
		u := historyURI(in.Name)
		want[u] = &mcp.Resource{URI: u, Name: in.Name + "/" + historyFile, Title: "History of session " + in.Name,
			Description: fmt.Sprintf("The executions of the %s session %s, as a Jupyter notebook.", in.Lang, in.Name), MIMEType: ipynbType}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, outs := range r.outputs {
		if !names[name] {
			delete(r.outputs, name)
			continue
		}
		for u, res := range outs {
			want[u] = res
		}
	}
	var gone []string
	for u := range r.listed {
		if want[u] == nil {
			gone = append(gone, u)
			delete(r.listed, u)
		}
	}
	if len(gone) > 0 {
		r.s.mcp.RemoveResources(gone...)
	}
	for u, res := range want {
		if !r.listed[u] {
			r.listed[u] = true
			r.s.mcp.AddResource(res, r.read)
		}
	}
}

// outputsOf lists the outputs of an execution of session name.
func (r *resources) outputsOf(name string, outs []Output) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range outs {
		if o.URI == "" || r.listed[o.URI] {
			continue
		}
		res := &mcp.Resource{URI: o.URI, Name: name + "/outputs/" + path.Base(o.Path), Title: "Output of session " + name, MIMEType: o.Mime}
		if r.outputs[name] == nil {
			r.outputs[name] = map[string]*mcp.Resource{}
		}
		r.outputs[name][o.URI] = res
		r.listed[o.URI] = true
		r.s.mcp.AddResource(res, r.read)
	}
}

// read serves a resource of a session the caller reaches.
func (r *resources) read(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, what, ok := parseURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err := r.s.reach(ctx, name, false); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, toolError(err)
	}
	if what == historyFile {
		execs, _, err := r.s.cfg.Client.History(ctx, name)
		if err != nil {
			if errors.Is(err, session.ErrNotFound) {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			return nil, toolError(err)
		}
		lang := "python"
		if st, err := r.s.cfg.Client.RecordedSettings(ctx, name); err == nil {
			lang = st.Lang
		}
		var b bytes.Buffer
		if err := history.WriteIPYNB(&b, lang, execs); err != nil {
			return nil, toolError(err)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: ipynbType, Text: b.String()}}}, nil
	}
	data, size, err := r.s.readFile(ctx, name, what, 0, maxResource)
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, toolError(err)
	}
	if size > int64(len(data)) {
		return nil, toolError(fmt.Errorf("%w %s: %d bytes, over the %d a resource read returns; copy it out with `runtimectl session cp`", session.ErrInvalid, what, size, maxResource))
	}
	mt := mimeOf(what, data)
	c := &mcp.ResourceContents{URI: uri, MIMEType: mt}
	if isText(mt, data) {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// mimeOf is a file's media type, from its name, else its first bytes, without parameters.
func mimeOf(p string, data []byte) string {
	mt := mime.TypeByExtension(path.Ext(p))
	if mt == "" {
		mt = http.DetectContentType(data)
	}
	if base, _, err := mime.ParseMediaType(mt); err == nil {
		return base
	}
	return "application/octet-stream"
}

// isText says whether data of media type mt reads as text: text/*, JSON, XML, or UTF-8 with no
// NUL in a type that says nothing.
func isText(mt string, data []byte) bool {
	switch {
	case strings.HasPrefix(mt, "image/") && mt != "image/svg+xml", strings.HasPrefix(mt, "audio/"), strings.HasPrefix(mt, "video/"):
		return false
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "json"), strings.HasSuffix(mt, "xml"):
		return utf8.Valid(data)
	}
	return utf8.Valid(data) && !bytes.ContainsRune(data, 0)
}
