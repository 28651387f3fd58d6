//! The X/Y/Z plot's picture, laid out as A1111 lays it out (`images.image_grid` and
//! `draw_grid_annotations`): cells in X columns and Y rows on white, X labels above, Y
//! labels to the left, and one such grid per Z value side by side under its Z label.

use inference::imaging::ImageRgb8;

use super::Planned;
use super::text::Font;

const WHITE: [u8; 3] = [255; 3];
const BLACK: [u8; 3] = [0; 3];

/// The grid of `planned`'s cells. `images` holds each cell's image in `planned.cells`
/// order; a cell without one (failed or cancelled) is black, as in A1111. `None` when no
/// cell has an image.
pub fn draw(planned: &Planned, images: &[Option<ImageRgb8>]) -> Option<ImageRgb8> {
    let tile = tile_size(images)?;
    let [nx, ny, nz] = planned.shape;
    let [x_labels, y_labels, z_labels] = &planned.labels;
    let subgrids: Vec<ImageRgb8> = (0..nz)
        .map(|z| {
            let mut cells = blank(nx as u32 * tile.0, ny as u32 * tile.1, WHITE);
            for (cell, image) in planned.cells.iter().zip(images) {
                let [x, y, cz] = cell.at;
                if cz != z {
                    continue;
                }
                let (left, top) = (x as u32 * tile.0, y as u32 * tile.1);
                match image {
                    // Smaller cells are centred in their tile (A1111 1.10).
                    Some(image) => paste(
                        &mut cells,
                        image,
                        (
                            left + (tile.0 - image.width) / 2,
                            top + (tile.1 - image.height) / 2,
                        ),
                    ),
                    None => paste(&mut cells, &blank(tile.0, tile.1, BLACK), (left, top)),
                }
            }
            annotate(&cells, tile, x_labels, y_labels)
        })
        .collect();
    let sub = (subgrids[0].width, subgrids[0].height);
    let mut row = blank(sub.0 * nz as u32, sub.1, WHITE);
    for (z, grid) in subgrids.iter().enumerate() {
        paste(&mut row, grid, (z as u32 * sub.0, 0));
    }
    Some(annotate(&row, sub, z_labels, &[String::new()]))
}

/// The grid's size for cells of `tile` pixels, without drawing it.
pub fn size(planned: &Planned, tile: (u32, u32)) -> (u32, u32) {
    let [nx, ny, nz] = planned.shape;
    let [x_labels, y_labels, z_labels] = &planned.labels;
    let cells = (nx as u32 * tile.0, ny as u32 * tile.1);
    let (left, top) = Layout::new(tile, x_labels, y_labels).pads();
    let sub = (cells.0 + left, cells.1 + top);
    let (_, z_top) = Layout::new(sub, z_labels, &[String::new()]).pads();
    (sub.0 * nz as u32, sub.1 + z_top)
}

/// Refuses a grid larger than Ember reads (16,384 pixels a side): it could not be opened
/// again. `tile` is the largest image a cell makes.
pub fn check_size(planned: &Planned, tile: (u32, u32)) -> Result<(), String> {
    let (width, height) = size(planned, tile);
    let most = inference::imaging::MAX_INPUT_SIDE;
    if width > most || height > most {
        return Err(format!(
            "the plot's grid would be {width}×{height} pixels, more than the {most} a side \
             Ember can open; use fewer values or a smaller size"
        ));
    }
    Ok(())
}

/// The largest cell's width and height.
fn tile_size(images: &[Option<ImageRgb8>]) -> Option<(u32, u32)> {
    let present = images.iter().flatten();
    let width = present.clone().map(|i| i.width).max()?;
    let height = present.map(|i| i.height).max()?;
    Some((width, height))
}

/// A1111's label layout for a grid of `tile`-sized cells.
struct Layout {
    tile: (u32, u32),
    font: Font,
    line_spacing: f32,
    pad_left: u32,
    /// Each column's label lines (wrapped to the cell's width) and each row's.
    columns: Vec<Vec<String>>,
    rows: Vec<Vec<String>>,
}

impl Layout {
    fn new(tile: (u32, u32), column_labels: &[String], row_labels: &[String]) -> Self {
        let font_size = (tile.0 + tile.1) / 25;
        let font = Font::new(font_size as f32);
        let pad_left = if row_labels.iter().all(String::is_empty) {
            0
        } else {
            tile.0 * 3 / 4
        };
        let columns = column_labels
            .iter()
            .map(|t| wrap(&font, t, tile.0 as f32))
            .collect();
        let rows = row_labels
            .iter()
            .map(|t| wrap(&font, t, pad_left as f32))
            .collect();
        Self {
            tile,
            font,
            line_spacing: (font_size / 2) as f32,
            pad_left,
            columns,
            rows,
        }
    }

    /// A line's height: an empty one has none (PIL's bounding box of nothing).
    fn line_height(&self, line: &str) -> f32 {
        if line.trim().is_empty() {
            0.0
        } else {
            self.font.line_height()
        }
    }

    /// A column label's height: its lines and the spaces between them.
    fn column_height(&self, lines: &[String]) -> f32 {
        let lines_and_spaces: f32 = lines
            .iter()
            .map(|l| self.line_height(l) + self.line_spacing)
            .sum();
        lines_and_spaces - self.line_spacing
    }

    /// A row label's height, as A1111 counts it: its lines without the spaces (a quirk
    /// that centres a many-line label a little low).
    fn row_height(&self, lines: &[String]) -> f32 {
        lines.iter().map(|l| self.line_height(l)).sum()
    }

    /// The space left of the cells and above them.
    fn pads(&self) -> (u32, u32) {
        let heights: Vec<f32> = self.columns.iter().map(|l| self.column_height(l)).collect();
        let top = if heights.iter().sum::<f32>() == 0.0 {
            0.0
        } else {
            heights.iter().copied().fold(0.0, f32::max) + self.line_spacing * 2.0
        };
        (self.pad_left, top as u32)
    }

    /// Draws `lines` centred on `x` from `y` down, each shrunk until it fits `allowed`.
    fn draw_lines(
        &self,
        out: &mut ImageRgb8,
        (x, mut y): (f32, f32),
        lines: &[String],
        allowed: f32,
    ) {
        for line in lines {
            let mut font = Font::new(self.font.size());
            while font.width(line) > allowed && font.size() > 1.0 {
                font = Font::new(font.size() - 1.0);
            }
            let height = self.line_height(line);
            let width = out.width;
            font.draw_centred(line, (x, y + height / 2.0), BLACK, (&mut out.pixels, width));
            y += height + self.line_spacing;
        }
    }
}

/// `cells` with the labels around it: each column label above its column, each row label
/// left of its row.
fn annotate(
    cells: &ImageRgb8,
    tile: (u32, u32),
    column_labels: &[String],
    row_labels: &[String],
) -> ImageRgb8 {
    let layout = Layout::new(tile, column_labels, row_labels);
    let (pad_left, pad_top) = layout.pads();
    let mut out = blank(cells.width + pad_left, cells.height + pad_top, WHITE);
    paste(&mut out, cells, (pad_left, pad_top));
    let (w, h) = (layout.tile.0 as f32, layout.tile.1 as f32);
    for (col, lines) in layout.columns.iter().enumerate() {
        let x = pad_left as f32 + w * col as f32 + w / 2.0;
        let y = pad_top as f32 / 2.0 - layout.column_height(lines) / 2.0;
        layout.draw_lines(&mut out, (x, y), lines, w);
    }
    for (row, lines) in layout.rows.iter().enumerate() {
        let x = pad_left as f32 / 2.0;
        let y = pad_top as f32 + h * row as f32 + h / 2.0 - layout.row_height(lines) / 2.0;
        layout.draw_lines(&mut out, (x, y), lines, pad_left as f32);
    }
    out
}

/// A1111's word wrap: words added to a line while it fits, a word that does not starting
/// the next (so a first word too long for the width leaves an empty first line, as there).
fn wrap(font: &Font, text: &str, allowed: f32) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let last = lines.last_mut().expect("one line at least");
        let joined = format!("{last} {word}").trim().to_string();
        if font.width(&joined) <= allowed {
            *last = joined;
        } else {
            lines.push(word.to_string());
        }
    }
    lines
}

fn blank(width: u32, height: u32, color: [u8; 3]) -> ImageRgb8 {
    ImageRgb8 {
        width,
        height,
        pixels: color.repeat(width as usize * height as usize),
    }
}

/// Copies `image` into `onto` with its top-left corner at `(left, top)`, clipped.
fn paste(onto: &mut ImageRgb8, image: &ImageRgb8, (left, top): (u32, u32)) {
    let width = image.width.min(onto.width.saturating_sub(left)) as usize;
    for y in 0..image.height.min(onto.height.saturating_sub(top)) {
        let from = (y * image.width) as usize * 3;
        let to = (((top + y) * onto.width + left) as usize) * 3;
        onto.pixels[to..to + width * 3].copy_from_slice(&image.pixels[from..from + width * 3]);
    }
}
