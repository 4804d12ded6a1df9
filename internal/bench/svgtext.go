package bench

// Text measurement for the SVG charts. A browser picks the font, so the
// charts cannot measure their text; they estimate it from Arial's advance
// widths (Helvetica's are the same), scaled up by textSafety to cover the
// wider system fonts the charts ask for first, and lay out around that.

// arialWidths are Arial's advance widths of the printable ASCII characters
// from ' ' (32) to '~' (126), in thousandths of an em.
var arialWidths = [...]int{
	278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, // ' '../
	556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556, // 0..?
	1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, // @..O
	667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, // P.._
	333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, // `..o
	556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584, // p..~
}

const (
	// textSafety covers fonts wider than Arial (Segoe UI, San Francisco).
	textSafety = 1.12
	// boldFactor is how much wider bold text runs.
	boldFactor = 1.08
	// wideGlyph is the width assumed for characters outside ASCII (en
	// dash, µ, middle dot, and the like), generously.
	wideGlyph = 1000
)

// textWidth estimates the width of s set at size (px), bold or not.
func textWidth(s string, size float64, bold bool) float64 {
	var units int
	for _, r := range s {
		switch {
		case r >= ' ' && r <= '~':
			units += arialWidths[r-' ']
		default:
			units += wideGlyph
		}
	}
	w := float64(units) / 1000 * size * textSafety
	if bold {
		w *= boldFactor
	}
	return w
}
