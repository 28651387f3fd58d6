//! A1111's X/Y/Z plot value lists: comma-separated (Python's csv, spaces after commas
//! skipped, `"a, b"` one value) with integer and float ranges (`1-5`, `1-9 (+2)`,
//! `1-10 [4]`), read as `scripts/xyz_grid.py` (v1.10) reads them.

/// The values of a list, each stripped; empty ones are kept (a string axis takes them).
pub fn split(text: &str) -> Result<Vec<String>, String> {
    let bytes = crate::styles::skip_initial_spaces(text.as_bytes());
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes.as_slice());
    let mut values = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("could not read the values: {e}"))?;
        values.extend(record.iter().map(|v| v.trim().to_string()));
    }
    Ok(values)
}

/// Whole numbers: each value a number or a range (`1-5`, `1-9 (+2)`, `5-1 (-1)`, or
/// `1-10 [4]` for four values spread evenly, truncated as A1111's `int(np.linspace)`).
/// (`i128`: every seed a `u64` holds, and no range's arithmetic overflows.)
pub fn integers(values: &[String]) -> Result<Vec<i128>, String> {
    let mut out = Vec::new();
    for value in values.iter().filter(|v| !v.is_empty()) {
        match range(value, parse_int) {
            Some(Range::Step(start, end, step)) => {
                // Python's `range(start, end + 1, step)`, A1111's quirk for a falling one
                // included (`5-1 (-1)` gives 5, 4, 3).
                if step == 0 {
                    return Err(format!("{value:?}: a step of 0 never ends"));
                }
                let stop = end.saturating_add(1);
                let mut v = start;
                while (step > 0 && v < stop) || (step < 0 && v > stop) {
                    out.push(v);
                    v += step;
                    check_count(out.len(), value)?;
                }
            }
            Some(Range::Count(start, end, count)) => {
                check_count(count, value)?;
                out.extend(linspace(start as f64, end as f64, count).map(|v| v as i128));
            }
            None => out.push(parse_int(value).ok_or_else(|| not_a("whole number", value))?),
        }
    }
    Ok(out)
}

/// Numbers: each a number or a range (`5-8 (+1.5)` as NumPy's `arange(5, 8 + 1.5, 1.5)`,
/// `0.2-1 [5]` as `linspace`).
pub fn floats(values: &[String]) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for value in values.iter().filter(|v| !v.is_empty()) {
        match range(value, parse_float) {
            Some(Range::Step(start, end, step)) => {
                if step == 0.0 {
                    return Err(format!("{value:?}: a step of 0 never ends"));
                }
                let count = ((end + step - start) / step).ceil().max(0.0);
                check_count(count as usize, value)?;
                out.extend((0..count as usize).map(|i| start + i as f64 * step));
            }
            Some(Range::Count(start, end, count)) => {
                check_count(count, value)?;
                out.extend(linspace(start, end, count));
            }
            None => out.push(parse_float(value).ok_or_else(|| not_a("number", value))?),
        }
    }
    Ok(out)
}

/// More values than any plot could show: a typo (`1-100000`), not a plan.
const MAX_VALUES: usize = 1000;

fn check_count(count: usize, value: &str) -> Result<(), String> {
    if count > MAX_VALUES {
        return Err(format!(
            "{value:?} makes more than {MAX_VALUES} values; use a larger step"
        ));
    }
    Ok(())
}

fn not_a(what: &str, value: &str) -> String {
    format!("{value:?} is not a {what} or a range such as 1-5, 1-9 (+2) or 1-10 [4]")
}

enum Range<T> {
    /// `start-end (+step)`; the step is 1 without one.
    Step(T, T, T),
    /// `start-end [count]`.
    Count(T, T, usize),
}

/// `start-end`, `start-end (+step)` or `start-end [count]`, spaces allowed around each
/// part; `None` for anything else (a plain number such as `-1` included).
fn range<T: From<i8>>(text: &str, number: fn(&str) -> Option<T>) -> Option<Range<T>> {
    let text = text.trim();
    // The dash between the two numbers: not a leading sign, nor one right after the dash.
    let bytes = text.as_bytes();
    let dash = (1..bytes.len()).find(|&i| {
        bytes[i] == b'-' && {
            let before = text[..i].trim_end();
            before.ends_with(|c: char| c.is_ascii_digit() || c == '.')
        }
    })?;
    let start = number(text[..dash].trim())?;
    let rest = text[dash + 1..].trim_start();
    let (end_text, tail) = match rest.find(['(', '[']) {
        Some(at) => (&rest[..at], Some(&rest[at..])),
        None => (rest, None),
    };
    let end = number(end_text.trim())?;
    match tail {
        None => Some(Range::Step(start, end, T::from(1))),
        Some(tail) => {
            let tail = tail.trim_end();
            if let Some(step) = tail.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
                // A1111 wants the step's sign written: `(+2)`, `(-1)`.
                let step = step.trim();
                step.starts_with(['+', '-'])
                    .then(|| number(step))
                    .flatten()
                    .map(|step| Range::Step(start, end, step))
            } else {
                let count = tail.strip_prefix('[')?.strip_suffix(']')?.trim();
                count
                    .parse()
                    .ok()
                    .map(|count| Range::Count(start, end, count))
            }
        }
    }
}

/// A whole number within `u64`'s or `i64`'s range (so ranges of them cannot overflow).
fn parse_int(text: &str) -> Option<i128> {
    let v: i128 = text.strip_prefix('+').unwrap_or(text).parse().ok()?;
    (i128::from(i64::MIN)..=i128::from(u64::MAX))
        .contains(&v)
        .then_some(v)
}

fn parse_float(text: &str) -> Option<f64> {
    let v: f64 = text.strip_prefix('+').unwrap_or(text).parse().ok()?;
    v.is_finite().then_some(v)
}

/// NumPy's `linspace(start, end, count)`: both ends included.
fn linspace(start: f64, end: f64, count: usize) -> impl Iterator<Item = f64> {
    let step = if count > 1 {
        (end - start) / (count - 1) as f64
    } else {
        0.0
    };
    (0..count).map(move |i| {
        if i + 1 == count && count > 1 {
            end
        } else {
            start + i as f64 * step
        }
    })
}

/// A number as Python's `str(float)` writes it: `7.0`, `0.5`, `1e-05`, `1e+16`.
pub fn python_float(v: f64) -> String {
    // A1111 rounds a float axis' labels to 8 places first (past 1e7 an f64 holds no more
    // than that, and scaling would only add error).
    let v = if v.abs() < 1e7 {
        (v * 1e8).round() / 1e8
    } else {
        v
    };
    if v != 0.0 && !(1e-4..1e16).contains(&v.abs()) {
        // Python's repr: the shortest digits, an exponent of two digits at least.
        let text = format!("{v:e}");
        let (mantissa, exponent) = text.split_once('e').expect("`{:e}` has an exponent");
        let exponent: i32 = exponent.parse().expect("an exponent is a number");
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else if v == v.trunc() {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> Vec<String> {
        split(text).unwrap()
    }

    #[test]
    fn values_split_as_pythons_csv_with_skipinitialspace() {
        assert_eq!(list("a, b ,c"), ["a", "b", "c"]);
        assert_eq!(list("\"a, b\", c"), ["a, b", "c"]);
        assert_eq!(list("a\nb, c"), ["a", "b", "c"]);
        assert_eq!(list("a,,b"), ["a", "", "b"]);
    }

    #[test]
    fn integer_ranges_follow_a1111() {
        let ints = |t: &str| integers(&list(t)).unwrap();
        assert_eq!(ints("1-5"), [1, 2, 3, 4, 5]);
        assert_eq!(ints("1-5 (+2)"), [1, 3, 5]);
        assert_eq!(ints("5-1 (-1)"), [5, 4, 3]);
        assert_eq!(ints("1-10 [4]"), [1, 4, 7, 10]);
        assert_eq!(ints("-1, 3"), [-1, 3]);
        assert_eq!(ints("-5--3"), [-5, -4, -3]);
        assert_eq!(ints("10, , 20"), [10, 20]);
        assert!(integers(&list("abc")).is_err());
        assert!(integers(&list("1-5 (2)")).is_err());
        assert!(integers(&list("1-100000")).is_err());
        // No overflow at the ends of the range, and 64-bit seeds are numbers.
        assert!(integers(&list("1-9223372036854775807")).is_err());
        assert!(integers(&list("1-5 (+9223372036854775807)")).is_ok());
        assert_eq!(ints("18446744073709551615"), [18446744073709551615]);
        assert!(integers(&list("18446744073709551616")).is_err());
    }

    #[test]
    fn float_ranges_follow_numpy() {
        let f = |t: &str| floats(&list(t)).unwrap();
        assert_eq!(f("1-2 (+0.5)"), [1.0, 1.5, 2.0]);
        assert_eq!(f("0-1 [5]"), [0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(f("7, 7.5"), [7.0, 7.5]);
        assert_eq!(f("5-7"), [5.0, 6.0, 7.0]);
        assert!(floats(&list("nan")).is_err());
        assert_eq!(python_float(7.0), "7.0");
        assert_eq!(python_float(0.1 + 0.2), "0.3");
        assert_eq!(python_float(0.00001), "1e-05");
        assert_eq!(python_float(-2.5e16), "-2.5e+16");
        assert_eq!(python_float(0.0001), "0.0001");
        assert_eq!(python_float(0.0), "0.0");
    }
}
