package ui

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"regexp"
	"strconv"
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
	if format == "raw" {
		return u.decodeRaw(data)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	return img, err
}

// decodeRaw turns RGB24 bytes into an image. A raw frame does not carry its
// size: it is the screen's, or a downscale that keeps the screen's aspect
// ratio, so the size is the factorization of the pixel count whose aspect is
// nearest the screen's.
func (u *UI) decodeRaw(data []byte) (image.Image, error) {
	p := u.src.Pool()
	w, h, ok := rawDims(len(data), p.ScreenW, p.ScreenH)
	if !ok {
		return nil, errors.New("raw frame: size not recoverable from its length")
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i, j := 0, 0; i+2 < len(data); i, j = i+3, j+4 {
		img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = data[i], data[i+1], data[i+2], 255
	}
	return img, nil
}

func rawDims(n, sw, sh int) (w, h int, ok bool) {
	if n == 0 || n%3 != 0 || sw <= 0 || sh <= 0 {
		return 0, 0, false
	}
	px := n / 3
	want := float64(sw) / float64(sh)
	best := -1.0
	for c := 1; c*c <= px; c++ {
		if px%c != 0 {
			continue
		}
		for _, cw := range []int{c, px / c} {
			ch := px / cw
			if cw > sw || ch > sh {
				continue
			}
			d := float64(cw)/float64(ch) - want
			if d < 0 {
				d = -d
			}
			if best < 0 || d < best {
				best, w, h = d, cw, ch
			}
		}
	}
	// Accept only a size within rounding of the screen's aspect ratio.
	if best < 0 || best > want/float64(h) {
		return 0, 0, false
	}
	return w, h, true
}

// httpError is an error with the status it answers.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.msg) }
