//! The plotting primitives every report image is drawn with: an RGB canvas (filled
//! rectangles, thick lines, polylines, dots) encoded as a PNG, and a [`Frame`] that maps data
//! coordinates onto a pixel rectangle with grid lines at 1-2-5 ticks. No text and no fonts:
//! scales, tick spacings and legends are written into the Markdown beside each image.

pub type Rgb = [u8; 3];

pub const WHITE: Rgb = [255, 255, 255];
pub const BLACK: Rgb = [0, 0, 0];
/// Grid lines: light enough that data drawn over them stays readable.
pub const GRID: Rgb = [225, 225, 225];
pub const BORDER: Rgb = [110, 110, 110];

/// Series colours, distinguishable from each other on white (no yellow): the report's legends
/// name them by index and hex value.
pub const PALETTE: [Rgb; 10] = [
    [0, 114, 178],
    [213, 94, 0],
    [0, 158, 115],
    [117, 112, 179],
    [230, 159, 0],
    [86, 180, 233],
    [204, 121, 167],
    [70, 70, 70],
    [140, 86, 75],
    [160, 160, 30],
];

/// `#rrggbb`, how the Markdown legends name a colour.
pub fn hex(c: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// A white RGB image; drawing outside it is clipped, never an error.
pub struct Canvas {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Canvas {
    pub fn new(width: usize, height: usize) -> Canvas {
        Canvas { width, height, rgb: vec![255; width * height * 3] }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    pub fn put(&mut self, x: i64, y: i64, c: Rgb) {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return;
        }
        let i = (y as usize * self.width + x as usize) * 3;
        self.rgb[i..i + 3].copy_from_slice(&c);
    }

    /// The `w` x `h` rectangle whose top-left pixel is (x, y).
    pub fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y.max(0)..(y + h).min(self.height as i64) {
            for xx in x.max(0)..(x + w).min(self.width as i64) {
                self.put(xx, yy, c);
            }
        }
    }

    /// A `size` x `size` square centred on (x, y) (for even sizes, the extra pixel goes right/down).
    pub fn dot(&mut self, x: i64, y: i64, size: i64, c: Rgb) {
        self.fill_rect(x - (size - 1) / 2, y - (size - 1) / 2, size, size, c);
    }

    /// A straight line (Bresenham) drawn with a `thickness`-pixel square brush.
    pub fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb, thickness: i64) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.dot(x, y, thickness, c);
            if x == x1 && y == y1 {
                return;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    pub fn polyline(&mut self, points: &[(i64, i64)], c: Rgb, thickness: i64) {
        for w in points.windows(2) {
            self.line(w[0], w[1], c, thickness);
        }
        if let [only] = points {
            self.dot(only.0, only.1, thickness, c);
        }
    }

    /// The image as an 8-bit RGB PNG (deterministic bytes for the same pixels).
    pub fn encode_png(&self) -> Result<Vec<u8>, String> {
        let mut png = Vec::new();
        let mut enc = png::Encoder::new(&mut png, self.width as u32, self.height as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(|e| e.to_string())?;
        w.write_image_data(&self.rgb).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
        Ok(png)
    }
}

/// Decode an 8-bit RGB PNG (as [`Canvas::encode_png`] writes it) into (width, height,
/// pixels), so tests and tools can check images without another dependency.
pub fn decode_png(bytes: &[u8]) -> Result<(usize, usize, Vec<Rgb>), String> {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().map_err(|e| e.to_string())?;
    let mut buf = vec![0; reader.output_buffer_size().ok_or("the image is too large")?];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    if info.color_type != png::ColorType::Rgb || info.bit_depth != png::BitDepth::Eight {
        return Err(format!("{:?} {:?}, not 8-bit RGB", info.color_type, info.bit_depth));
    }
    let pixels = buf[..info.buffer_size()].chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    Ok((info.width as usize, info.height as usize, pixels))
}

/// A plot area: a pixel rectangle and the data ranges it shows (x left to right, y bottom to
/// top). Callers pass already-transformed values for log axes.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub left: i64,
    pub top: i64,
    pub width: i64,
    pub height: i64,
    pub x: (f64, f64),
    pub y: (f64, f64),
}

impl Frame {
    /// The pixel of data point (x, y), clamped into the frame so out-of-range values stay visible
    /// on its edge instead of vanishing.
    pub fn px(&self, x: f64, y: f64) -> (i64, i64) {
        let fx = ((x - self.x.0) / (self.x.1 - self.x.0)).clamp(0.0, 1.0);
        let fy = ((y - self.y.0) / (self.y.1 - self.y.0)).clamp(0.0, 1.0);
        (
            self.left + (fx * (self.width - 1) as f64).round() as i64,
            self.top + ((1.0 - fy) * (self.height - 1) as f64).round() as i64,
        )
    }

    /// Light grid lines at data values `xs` (vertical) and `ys` (horizontal), then the border.
    pub fn axes(&self, c: &mut Canvas, xs: &[f64], ys: &[f64]) {
        for &x in xs {
            self.vline(c, x, GRID, 1);
        }
        for &y in ys {
            self.hline(c, y, GRID, 1);
        }
        let (r, b) = (self.left + self.width - 1, self.top + self.height - 1);
        c.polyline(&[(self.left, self.top), (r, self.top), (r, b), (self.left, b), (self.left, self.top)], BORDER, 1);
    }

    pub fn hline(&self, c: &mut Canvas, y: f64, colour: Rgb, thickness: i64) {
        c.line(self.px(self.x.0, y), self.px(self.x.1, y), colour, thickness);
    }

    pub fn vline(&self, c: &mut Canvas, x: f64, colour: Rgb, thickness: i64) {
        c.line(self.px(x, self.y.0), self.px(x, self.y.1), colour, thickness);
    }
}

/// The tick step for a span: the smallest of 1, 2, 5 x 10^e giving at most `max_ticks` intervals.
pub fn tick_step(span: f64, max_ticks: usize) -> f64 {
    let raw = span / max_ticks.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|&s| s >= raw).unwrap_or(10.0 * mag)
}

/// The multiples of `step` inside [lo, hi].
pub fn ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_five() {
        assert_eq!(tick_step(4500.0, 10), 500.0);
        assert_eq!(tick_step(0.3, 6), 0.05);
        assert_eq!(ticks(0.0, 1.0, 0.25), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn frame_maps_corners_and_clamps() {
        let f = Frame { left: 10, top: 5, width: 101, height: 51, x: (0.0, 1.0), y: (0.0, 10.0) };
        assert_eq!(f.px(0.0, 0.0), (10, 55));
        assert_eq!(f.px(1.0, 10.0), (110, 5));
        assert_eq!(f.px(7.0, -3.0), (110, 55));
    }

    #[test]
    fn drawing_is_clipped() {
        let mut c = Canvas::new(4, 3);
        c.line((-5, -5), (10, 10), BLACK, 2);
        c.fill_rect(-1, -1, 100, 2, BLACK);
        let (w, h, pixels) = decode_png(&c.encode_png().unwrap()).unwrap();
        assert_eq!((w, h), (4, 3));
        assert_eq!(&pixels[..4], &[BLACK; 4]);
        assert_eq!(pixels[4 + 1], BLACK);
        assert_eq!(pixels[4 + 3], WHITE);
    }
}
