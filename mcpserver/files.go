package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

// The budgets of the file tools. What leaves a session also keeps to cp's (4 GiB per copy).
const (
	maxWrite     = 8 << 20 // write_file's content, decoded (base64 of it fits in the 16 MiB of a message)
	maxRead      = 4 << 20 // what read_file returns at most
	maxReadText  = 100000  // read_file's default for text
	maxReadOther = 1 << 20 // read_file's default for other binary content
	maxRich      = 4 << 20 // a rich output's bytes in run_code's reply
)

type writeFileIn struct {
	Path     string `json:"path" jsonschema:"the file: a path relative to /workspace, or absolute inside it; a file there is replaced"`
	Content  string `json:"content" jsonschema:"the file's content: text, or base64 when encoding is base64"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8 (the default) or base64, for binary content"`
	inSession
}

type fileOut struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"the file's absolute path in the session"`
	Size    int64  `json:"size" jsonschema:"its size in bytes"`
}

func addWriteFile(s *Server) {
	sc := schema[writeFileIn]()
	sc.Properties["encoding"].Enum = []any{"utf-8", "base64"}
	addTool(s, &mcp.Tool{
		Name:        "write_file",
		Description: `Write a file into a session's /workspace (at most 8 MiB), replacing one that is there; the session's code can then read it. For data to analyse, code to import, or anything you would otherwise paste into run_code.`,
		InputSchema: sc,
		Annotations: hints("Write a file", false, true, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in writeFileIn) (*mcp.CallToolResult, fileOut, error) {
		abs, err := session.ResolvePath(in.Path)
		if err != nil {
			return nil, fileOut{}, err
		}
		data := []byte(in.Content)
		switch in.Encoding {
		case "", "utf-8":
		case "base64":
			if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
				return nil, fileOut{}, fmt.Errorf("%w content: not base64 (%v); send text with encoding utf-8", session.ErrInvalid, err)
			}
		default:
			return nil, fileOut{}, fmt.Errorf("%w encoding %q: use utf-8 or base64", session.ErrInvalid, in.Encoding)
		}
		if len(data) > maxWrite {
			return nil, fileOut{}, fmt.Errorf("%w content of %d bytes: write_file takes at most %d MiB; write the file in parts with run_code, or copy it in with `runtimectl session cp`", session.ErrInvalid, len(data), maxWrite>>20)
		}
		name, err := s.target(ctx, req, in.Session)
		if err != nil {
			return nil, fileOut{}, err
		}
		if err := s.cfg.Client.WriteFile(ctx, name, in.Path, bytes.NewReader(data)); err != nil {
			return nil, fileOut{}, err
		}
		return nil, fileOut{Session: name, Path: abs, Size: int64(len(data))}, nil
	})
}

type readFileIn struct {
	Path     string `json:"path" jsonschema:"the file: a path relative to /workspace, or absolute inside it"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"the byte to start at (default 0), to read a large file in parts"`
	MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"the most bytes to return (default 100000 for text and 1 MiB for other binary content; at most 4 MiB)"`
	inSession
}

type readFileOut struct {
	fileOut
	Mime     string `json:"mime"`
	Offset   int64  `json:"offset"`
	Returned int64  `json:"returned" jsonschema:"bytes returned, from offset"`
	More     bool   `json:"more" jsonschema:"the file goes on past what was returned: read on with offset"`
}

func addReadFile(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "read_file",
		Description: `Read a file of a session's /workspace: text comes back as text (the first 100000 bytes unless you ask for more; read on with offset), an image (PNG, JPEG, GIF, WebP) as an image you can see, other content as a binary resource.`,
		InputSchema: schema[readFileIn](),
		Annotations: hints("Read a file", true, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in readFileIn) (*mcp.CallToolResult, readFileOut, error) {
		abs, err := session.ResolvePath(in.Path)
		if err != nil {
			return nil, readFileOut{}, err
		}
		if in.Offset < 0 || in.MaxBytes < 0 {
			return nil, readFileOut{}, fmt.Errorf("%w offset and max_bytes: give 0 or more", session.ErrInvalid)
		}
		if in.MaxBytes > maxRead {
			return nil, readFileOut{}, fmt.Errorf("%w max_bytes %d: read_file returns at most %d MiB at once; read in parts with offset", session.ErrInvalid, in.MaxBytes, maxRead>>20)
		}
		name, err := s.target(ctx, req, in.Session)
		if err != nil {
			return nil, readFileOut{}, err
		}
		data, size, err := s.readFile(ctx, name, in.Path, in.Offset, maxRead)
		if err != nil {
			return nil, readFileOut{}, err
		}
		mt := mimeOf(abs, data)
		out := readFileOut{fileOut: fileOut{Session: name, Path: abs, Size: size}, Mime: mt, Offset: in.Offset}
		if picture(mt) {
			if in.Offset > 0 || size > int64(len(data)) {
				return nil, readFileOut{}, fmt.Errorf("%w %s: an image of %d bytes, over the %d MiB read_file returns; make a smaller one with run_code", session.ErrInvalid, in.Path, size, maxRead>>20)
			}
			out.Returned = int64(len(data))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: data, MIMEType: mt}}}, out, nil
		}
		text := isText(mt, trimPartialRune(data))
		limit := in.MaxBytes
		if limit == 0 {
			limit = maxReadOther
			if text {
				limit = maxReadText
			}
		}
		if int64(len(data)) > limit {
			data = data[:limit]
		}
		if text {
			data = trimPartialRune(data)
		}
		out.Returned = int64(len(data))
		out.More = in.Offset+out.Returned < size
		var c mcp.Content
		if text {
			t := string(data)
			if out.More {
				t += fmt.Sprintf("\n[... %d more bytes: read on with offset %d ...]", size-in.Offset-out.Returned, in.Offset+out.Returned)
			}
			c = &mcp.TextContent{Text: t}
		} else {
			c = &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file://" + abs, MIMEType: mt, Blob: data}}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{c}}, out, nil
	})
}

// picture says whether a model can be shown images of type mt.
func picture(mt string) bool {
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// trimPartialRune drops an incomplete UTF-8 character at the end of data (a read that stopped
// inside it).
func trimPartialRune(data []byte) []byte {
	for i := len(data) - 1; i >= 0 && i >= len(data)-3; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return data[:i]
			}
			break
		}
	}
	return data
}

// readFile returns at most max bytes of the session's file p from offset, and the file's size.
func (s *Server) readFile(ctx context.Context, name, p string, offset, max int64) ([]byte, int64, error) {
	w := &window{skip: offset, max: max}
	size, err := s.cfg.Client.ReadFile(ctx, name, p, w)
	return w.buf.Bytes(), size, err
}

// window keeps max bytes of what is written to it, after skipping skip.
type window struct {
	skip, max int64
	buf       bytes.Buffer
}

func (w *window) Write(p []byte) (int, error) {
	n := len(p)
	if w.skip > 0 {
		k := min(w.skip, int64(len(p)))
		w.skip -= k
		p = p[k:]
	}
	if room := w.max - int64(w.buf.Len()); room > 0 {
		w.buf.Write(p[:min(room, int64(len(p)))])
	}
	return n, nil
}

type listFilesIn struct {
	Path string `json:"path,omitempty" jsonschema:"a folder of /workspace to list (default: all of it)"`
	inSession
}

type listFilesOut struct {
	Session   string           `json:"session"`
	Files     []execproto.File `json:"files" jsonschema:"newest first; paths relative to /workspace"`
	Total     int              `json:"total" jsonschema:"files in the whole workspace"`
	TotalSize int64            `json:"total_size" jsonschema:"their size in bytes"`
}

func addListFiles(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "list_files",
		Description: `List the files of a session's /workspace, newest first (the 200 newest), with their sizes and times, and the count and size of all of them. Files written by code, write_file or earlier sessions' work are all there.`,
		InputSchema: schema[listFilesIn](),
		Annotations: hints("List files", true, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in listFilesIn) (*mcp.CallToolResult, listFilesOut, error) {
		abs, err := session.ResolvePath(in.Path)
		if err != nil {
			return nil, listFilesOut{}, err
		}
		h, err := s.use(ctx, req, in.Session, "")
		if err != nil {
			return nil, listFilesOut{}, err
		}
		rep, err := h.Files(ctx)
		if err != nil {
			return nil, listFilesOut{}, err
		}
		out := listFilesOut{Session: h.Name(), Files: []execproto.File{}, Total: rep.Total, TotalSize: rep.TotalSize}
		rel := strings.TrimPrefix(strings.TrimPrefix(abs, session.Workspace), "/")
		for _, f := range rep.Files {
			if rel == "" || f.Path == rel || strings.HasPrefix(f.Path, rel+"/") {
				out.Files = append(out.Files, f)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "session %s: %d files in /workspace, %s", h.Name(), rep.Total, session.FormatSize(rep.TotalSize))
		if rel != "" {
			fmt.Fprintf(&b, "; %d of them in %s", len(out.Files), abs)
		}
		if len(rep.Files) < rep.Total {
			fmt.Fprintf(&b, " (only the %d newest of the workspace are looked at)", len(rep.Files))
		}
		b.WriteString(", newest first:\n")
		for _, f := range out.Files {
			fmt.Fprintf(&b, "%s\t%s\t%s\n", f.Path, session.FormatSize(f.Size), f.Modified.Format("2006-01-02 15:04:05Z"))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
	})
}

// richContent is the content of an execution's rich outputs: an image a model can see as
// image content, HTML as an embedded resource, text (markdown, JSON, plain) as text, anything
// else as a link to its resource. An output whose bytes a display carried (shown) is left out:
// the display sent it. left is the reply's rich budget, spent here.
func (s *Server) richContent(ctx context.Context, name string, outs []history.Output, left *int64, shown *shownData) []mcp.Content {
	var content []mcp.Content
	for i, o := range outs {
		uri := outputURI(name, o.Path)
		data := o.Data
		size := int64(len(data))
		var problem string
		if len(data) == 0 && o.Path != "" {
			d, n, err := s.readFile(ctx, name, o.Path, 0, maxRich)
			size = n
			switch {
			case err != nil:
				problem = toolError(err).Error()
			case n > int64(len(d)):
				problem = fmt.Sprintf("%d bytes, over the %d MiB a reply carries", n, maxRich>>20)
			default:
				data = d
			}
		}
		if size > 0 && shown.has(o.Mime, data, size) {
			continue // a display sent it
		}
		if problem == "" && int64(len(data)) > *left {
			problem = fmt.Sprintf("%d bytes, over what is left of the %d MiB of rich output a reply carries", len(data), maxRichReply>>20)
		}
		if problem == "" {
			*left -= int64(len(data))
		}
		if problem != "" || len(data) == 0 {
			if problem == "" {
				problem = "empty"
			}
			note := fmt.Sprintf("output %d (%s, %s): not included: %s", i+1, o.Mime, o.Path, problem)
			content = append(content, &mcp.TextContent{Text: note})
			if uri != "" {
				content = append(content, &mcp.ResourceLink{URI: uri, Name: path.Base(o.Path), MIMEType: o.Mime})
			}
			continue
		}
		switch {
		case picture(o.Mime):
			content = append(content, &mcp.ImageContent{Data: data, MIMEType: o.Mime})
		case o.Mime == "text/html" || o.Mime == "image/svg+xml":
			if uri == "" {
				uri = fmt.Sprintf("%s#output-%d", historyURI(name), i+1)
			}
			content = append(content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: o.Mime, Text: s.clip(string(data), o.Mime, name)}})
		case isText(o.Mime, data):
			content = append(content, &mcp.TextContent{Text: s.clip(string(data), o.Mime, name)})
		case uri != "":
			content = append(content, &mcp.ResourceLink{URI: uri, Name: path.Base(o.Path), MIMEType: o.Mime})
		default:
			content = append(content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: fmt.Sprintf("%s#output-%d", historyURI(name), i+1), MIMEType: o.Mime, Blob: data}})
		}
	}
	return content
}
