//! Every report image, drawn with plotters: titled, with labelled axes and a legend inside
//! the image, as an 8-bit RGB PNG and as an SVG. Text is rasterized from the embedded DejaVu
//! Sans (`learner/assets`, license beside it) by ab_glyph, so the PNG bytes depend on nothing
//! installed on the machine: the same data give the same bytes everywhere.
//!
//! A chart is a value implementing [`Draw`] (a drawing generic over the backend);
//! [`render`] draws it twice, into an RGB buffer and into an SVG string.

use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

pub type Rgb = [u8; 3];

pub const BLACK: Rgb = [0, 0, 0];
/// Grid lines: light enough that data drawn over them stays readable.
const GRID: RGBColor = RGBColor(228, 228, 228);
/// The vertical line marking a gate.
pub const GATE: Rgb = [220, 50, 50];

/// Series colours, distinguishable from each other on white (no yellow).
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

pub const fn rgb(c: Rgb) -> RGBColor {
    RGBColor(c[0], c[1], c[2])
}

/// The family name every chart's text uses; registered once per process with the embedded font.
const FONT: &str = "sans-serif";
static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS).is_ok());
    ok.then_some(()).ok_or_else(|| "the embedded DejaVu Sans font does not parse".to_string())
}

/// Text of `size` pixels in the chart font.
pub fn font(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&rgb(BLACK))
}

/// A drawing, for any backend.
pub trait Draw {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// What plotters' backend errors become: their message.
pub fn err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// One rendered chart.
pub struct Image {
    pub png: Vec<u8>,
    pub svg: String,
}

/// Draw `chart` on a white `width` x `height` image, as PNG and SVG.
pub fn render(chart: &impl Draw, (width, height): (u32, u32)) -> Result<Image, String> {
    register_font()?;
    let mut pixels = vec![255u8; width as usize * height as usize * 3];
    paint(BitMapBackend::with_buffer(&mut pixels, (width, height)), chart)?;
    let mut svg = String::new();
    paint(SVGBackend::with_string(&mut svg, (width, height)), chart)?;
    Ok(Image { png: encode_png(width, height, &pixels)?, svg })
}

/// `chart` on a white page of `backend`, flushed.
fn paint<DB: DrawingBackend>(backend: DB, chart: &impl Draw) -> Result<(), String> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    chart.draw(&root)?;
    root.present().map_err(err)
}

/// Render `chart` and write `{stem}.png` and `{stem}.svg` into `dir`; returns both paths.
pub fn write(
    chart: &impl Draw,
    size: (u32, u32),
    dir: &std::path::Path,
    stem: &str,
) -> crate::error::Result<[std::path::PathBuf; 2]> {
    let png = dir.join(format!("{stem}.png"));
    let image = render(chart, size).map_err(|message| crate::error::FitError::Report { path: png.clone(), message })?;
    let svg = dir.join(format!("{stem}.svg"));
    vnni_corpus::write_bytes(&png, &image.png)?;
    vnni_corpus::write_bytes(&svg, image.svg.as_bytes())?;
    Ok([png, svg])
}

/// An 8-bit RGB PNG (deterministic bytes for the same pixels).
fn encode_png(width: u32, height: u32, rgb: &[u8]) -> Result<Vec<u8>, String> {
    let mut png = Vec::new();
    let mut enc = png::Encoder::new(&mut png, width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(|e| e.to_string())?;
    w.write_image_data(rgb).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    Ok(png)
}

/// Decode an 8-bit RGB PNG (as [`render`] writes it) into (width, height, pixels), so tests
/// and tools can check images without another dependency.
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

/// A grid step of about `span / max_ticks` on the 1-2-5 ladder (10^e times 1, 2 or 5).
pub fn tick_step(span: f64, max_ticks: usize) -> f64 {
    let raw = (span / max_ticks.max(1) as f64).max(1e-12);
    let base = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * base).find(|s| *s >= raw).unwrap_or(10.0 * base)
}

/// A legend drawn as rows of (swatch, label) in `area`, `columns` entries per row.
pub fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, Rgb)],
    columns: usize,
) -> Result<(), String> {
    let (w, _) = area.dim_in_pixel();
    let columns = columns.max(1);
    let cell = (w as i32 - 16) / columns as i32;
    for (i, (label, colour)) in entries.iter().enumerate() {
        let (x, y) = (8 + (i % columns) as i32 * cell, 6 + (i / columns) as i32 * 18);
        area.draw(&Rectangle::new([(x, y + 2), (x + 18, y + 12)], rgb(*colour).filled())).map_err(err)?;
        area.draw(&Text::new(label.clone(), (x + 24, y), font(15))).map_err(err)?;
    }
    Ok(())
}

/// The rows a [`legend`] of `entries` takes at `columns` per row, in pixels.
pub fn legend_height(entries: usize, columns: usize) -> u32 {
    (entries.div_ceil(columns.max(1)) as u32) * 18 + 12
}

/// One line or dot series of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub colour: Rgb,
    pub points: Vec<(f64, f64)>,
}

/// Labelled axes over data ranges; x values may be transformed (log2) and formatted back.
pub struct Axes<'a> {
    pub title: String,
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub x_desc: String,
    pub y_desc: String,
    pub x_step: f64,
    pub y_step: f64,
    pub x_format: &'a dyn Fn(f64) -> String,
    pub y_format: &'a dyn Fn(f64) -> String,
}

type Cartesian<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

impl Axes<'_> {
    /// The chart with its title, mesh at the steps, and the axis descriptions.
    pub fn build<'a, DB: DrawingBackend>(
        &self,
        area: &'a DrawingArea<DB, Shift>,
        title_px: u32,
    ) -> Result<Cartesian<'a, DB>, String> {
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, font(title_px))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(self.x.0..self.x.1, self.y.0..self.y.1)
            .map_err(err)?;
        let count = |(lo, hi): (f64, f64), step: f64| (((hi - lo) / step).round() as usize + 1).max(2);
        chart
            .configure_mesh()
            .x_labels(count(self.x, self.x_step))
            .y_labels(count(self.y, self.y_step))
            .x_label_formatter(&|v| (self.x_format)(*v))
            .y_label_formatter(&|v| (self.y_format)(*v))
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .label_style(font(14))
            .axis_desc_style(font(15))
            .draw()
            .map_err(err)?;
        Ok(chart)
    }
}

/// A polyline per series, with its legend entry.
pub fn lines<'a, DB: DrawingBackend + 'a>(chart: &mut Cartesian<'a, DB>, series: &[Series]) -> Result<(), String> {
    for s in series {
        let colour = rgb(s.colour);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), colour.stroke_width(2)))
            .map_err(err)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
    }
    Ok(())
}

/// The chart's series legend, boxed, in a corner.
pub fn series_legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Cartesian<'a, DB>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(font(14))
        .background_style(WHITE.mix(0.9))
        .border_style(rgb(BLACK))
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sample;

    impl Draw for Sample {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
            let fmt = |v: f64| format!("{v:.0}");
            let axes = Axes {
                title: "Title of the chart".into(),
                x: (0.0, 10.0),
                y: (0.0, 1.0),
                x_desc: "regret (%)".into(),
                y_desc: "fraction of cells".into(),
                x_step: 2.0,
                y_step: 0.25,
                x_format: &fmt,
                y_format: &|v| format!("{v:.2}"),
            };
            let mut chart = axes.build(root, 22)?;
            lines(
                &mut chart,
                &[Series { label: "policy".into(), colour: PALETTE[0], points: vec![(0.0, 0.0), (10.0, 1.0)] }],
            )?;
            series_legend(&mut chart, SeriesLabelPosition::LowerRight)
        }
    }

    #[test]
    fn a_chart_has_its_title_axes_and_legend_as_text_and_pixels_and_the_same_bytes_twice() {
        let a = render(&Sample, (400, 300)).unwrap();
        for text in ["Title of the chart", "regret (%)", "fraction of cells", "policy", "0.50"] {
            assert!(a.svg.contains(text), "the SVG has no {text:?}");
        }
        let (w, h, pixels) = decode_png(&a.png).unwrap();
        assert_eq!((w, h), (400, 300));
        // The title is rasterized: dark pixels in its band at the top, above the plot.
        let dark = |p: &Rgb| p.iter().all(|&v| v < 90);
        assert!(pixels[..w * 26].iter().filter(|p| dark(p)).count() > 40, "no title text in the PNG");
        assert!(pixels.contains(&PALETTE[0]), "the series was not drawn");
        let b = render(&Sample, (400, 300)).unwrap();
        assert!(a.png == b.png && a.svg == b.svg);
    }

    /// The bytes of a chart are pinned: nothing from the machine (fonts, float formatting)
    /// may reach them. A change of plotters, ab_glyph or the font changes them on purpose:
    /// then look at the chart and pin the new digests.
    #[test]
    fn a_chart_has_the_same_bytes_on_every_machine() {
        let image = render(&Sample, (400, 300)).unwrap();
        let digest = |b: &[u8]| vnni_kernels::digest::sha256_hex(b);
        assert_eq!(
            (digest(&image.png), digest(image.svg.as_bytes())),
            (PNG_SHA256.to_string(), SVG_SHA256.to_string())
        );
    }

    const PNG_SHA256: &str = "2ea2859c29e4ee4deea42565e9d5588d69fe22dbe536bc68f3daca46ec8ef4b4";
    const SVG_SHA256: &str = "8b92e18e12ad64f5f9f9358bfd759da140561030df92112619b97224b86b7726";

    #[test]
    fn tick_steps_sit_on_the_one_two_five_ladder() {
        assert_eq!(tick_step(10.0, 10), 1.0);
        assert_eq!(tick_step(0.3, 10), 0.05);
        assert_eq!(tick_step(4265.0, 8), 1000.0);
    }
}
