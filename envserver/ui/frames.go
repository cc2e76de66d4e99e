package ui

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"regexp"
	"strconv"

	"github.com/shinken-rl/shinken/envserver/render"
)

var hashRE = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// frame answers one frame's bytes as the server holds them: PNG and JPEG as
// they are, raw RGB24 converted to PNG. Frames are content-addressed, so the
// browser may keep them for good.
func (u *UI) frame(w http.ResponseWriter, r *http.Request) {
	hash := r.PathValue("hash")
	if !hashRE.MatchString(hash) {
		writeJSONError(w, http.StatusBadRequest, "bad_request", "frame: not a frame hash")
		return
	}
	width := 0
	if v := r.URL.Query().Get("w"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16 || n > maxThumbWidth {
			writeJSONError(w, http.StatusBadRequest, "bad_request", "frame: w must be 16.."+strconv.Itoa(maxThumbWidth))
			return
		}
		width = n
	}
	etag := `"` + hash + `"`
	if width > 0 {
		etag = `"` + hash + "-w" + strconv.Itoa(width) + `"`
	}
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	data, format, err := u.src.Frame(hash)
	if err != nil {
		writeSourceError(w, err)
		return
	}
	ctype := ""
	switch {
	case width > 0:
		data, err = u.thumb(hash, width, data, format)
		if err != nil {
			writeJSONError(w, http.StatusUnsupportedMediaType, "unsupported", err.Error())
			return
		}
		ctype = "image/jpeg"
	case format == "png":
		ctype = "image/png"
	case format == "jpeg":
		ctype = "image/jpeg"
	case format == "raw":
		img, err := u.decodeRaw(data)
		if err != nil {
			writeJSONError(w, http.StatusUnsupportedMediaType, "unsupported", err.Error())
			return
		}
		var buf bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&buf, img); err != nil {
			writeJSONError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		data, ctype = buf.Bytes(), "image/png"
	default:
		writeJSONError(w, http.StatusUnsupportedMediaType, "unsupported", "frame format "+format)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	w.Write(data)
}

// decodeImage decodes a stored frame of any format into an image.
func (u *UI) decodeImage(data []byte, format string) (image.Image, error) {
	p := u.src.Pool()
	return render.Decode(data, format, p.ScreenW, p.ScreenH)
}

// decodeRaw turns RGB24 bytes into an image (render.DecodeRaw on the
// pool's screen).
func (u *UI) decodeRaw(data []byte) (image.Image, error) {
	p := u.src.Pool()
	return render.DecodeRaw(data, p.ScreenW, p.ScreenH)
}

// httpError is an error with the status it answers.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.msg) }
