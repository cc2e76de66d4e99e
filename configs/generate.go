package configs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Binary documents a template can generate (docs/tasks.md, "Generated
// files"). Each returns base64, for a put_file step with "base64": true:
// a template's output is text, and these bytes are not.

// maxDocLines bounds a generated document.
const maxDocLines = 2000

// pdfBase64 writes a one-page-per-50-lines PDF showing lines in Helvetica
// 12 pt on A4, with a correct cross-reference table.
func pdfBase64(lines any) (string, error) {
	ls := docLines(lines)
	if len(ls) > maxDocLines {
		return "", fmt.Errorf("pdf: %d lines; at most %d", len(ls), maxDocLines)
	}
	const perPage = 50
	var pages [][]string
	for i := 0; i < len(ls) || i == 0; i += perPage {
		pages = append(pages, ls[i:min(i+perPage, len(ls))])
	}
	// Objects: 1 catalog, 2 pages, 3 font, then a page and its contents per page.
	var objs []string
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, page := range pages {
		var c strings.Builder
		c.WriteString("BT /F1 12 Tf 14 TL 56 790 Td\n")
		for _, l := range page {
			fmt.Fprintf(&c, "(%s) Tj T*\n", pdfEscape(l))
		}
		c.WriteString("ET")
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", c.Len(), c.String()))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

// pdfEscape escapes a line for a PDF string; characters outside Latin-1
// become '?'.
func pdfEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '(' || r == ')' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r >= 0xa0 && r <= 0xff:
			fmt.Fprintf(&b, "\\%03o", r)
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// pngBase64 draws lines of text (7x13 bitmap font, scaled by scale) in fg
// on a bg background, with a margin, as a two-color PNG. The font is a
// bitmap, so a pixel is either ink or not: the text is drawn once as a mask
// and scaled by copying pixels.
func pngBase64(lines any, scale int, fg, bg string) (string, error) {
	ls := docLines(lines)
	if len(ls) > 200 || scale < 1 || scale > 8 {
		return "", fmt.Errorf("png: %d lines at scale %d; at most 200 lines, scale 1..8", len(ls), scale)
	}
	fgc, err := parseColor(fg)
	if err != nil {
		return "", err
	}
	bgc, err := parseColor(bg)
	if err != nil {
		return "", err
	}
	face := basicfont.Face7x13
	w := 0
	for _, l := range ls {
		w = max(w, font.MeasureString(face, l).Ceil())
	}
	const margin = 8
	mask := image.NewAlpha(image.Rect(0, 0, w+2*margin, 13*len(ls)+2*margin))
	d := &font.Drawer{Dst: mask, Src: image.Opaque, Face: face}
	for i, l := range ls {
		d.Dot = fixed.P(margin, margin+13*i+11)
		d.DrawString(l)
	}
	mw, mh := mask.Rect.Dx(), mask.Rect.Dy()
	big := image.NewPaletted(image.Rect(0, 0, mw*scale, mh*scale), color.Palette{bgc, fgc})
	for y := 0; y < mh; y++ {
		row := big.Pix[y*scale*big.Stride : y*scale*big.Stride+mw*scale]
		for x := 0; x < mw; x++ {
			if mask.Pix[y*mask.Stride+x] >= 0x80 {
				for k := 0; k < scale; k++ {
					row[x*scale+k] = 1
				}
			}
		}
		for k := 1; k < scale; k++ {
			copy(big.Pix[(y*scale+k)*big.Stride:], row)
		}
	}
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, big); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

// colors are the names pngBase64 knows besides #rrggbb.
var colors = map[string]color.RGBA{
	"black": {0, 0, 0, 255}, "white": {255, 255, 255, 255}, "red": {200, 30, 30, 255},
	"green": {30, 150, 60, 255}, "blue": {30, 60, 200, 255}, "yellow": {240, 210, 40, 255},
	"gray": {128, 128, 128, 255}, "orange": {240, 140, 30, 255}, "purple": {130, 50, 160, 255},
}

func parseColor(s string) (color.RGBA, error) {
	if c, ok := colors[s]; ok {
		return c, nil
	}
	var r, g, b uint8
	if n, err := fmt.Sscanf(s, "#%02x%02x%02x", &r, &g, &b); err != nil || n != 3 {
		return color.RGBA{}, fmt.Errorf("color %q: a name or #rrggbb", s)
	}
	return color.RGBA{r, g, b, 255}, nil
}

// docLines takes a list parameter or a text with newlines.
func docLines(v any) []string {
	if s, ok := v.(string); ok {
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	return strs(v)
}
