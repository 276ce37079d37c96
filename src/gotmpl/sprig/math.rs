//! Sprig's integer and float math; the float functions in shopspring's decimals, as Sprig computes
//! them.

use gtmpl_ng::Value;

use crate::gotmpl::decimal::Decimal;

use super::args::{R, f, fail, i, num_f, want, want_min};

pub(super) fn add1(a: &[Value]) -> R {
    want(a, "add1", 1)?;
    Ok(i(&a[0]).wrapping_add(1).into())
}

pub(super) fn add(a: &[Value]) -> R {
    Ok(a.iter().fold(0i64, |acc, v| acc.wrapping_add(i(v))).into())
}

pub(super) fn sub(a: &[Value]) -> R {
    want(a, "sub", 2)?;
    Ok(i(&a[0]).wrapping_sub(i(&a[1])).into())
}

pub(super) fn div(a: &[Value]) -> R {
    want(a, "div", 2)?;
    i(&a[0])
        .checked_div(i(&a[1]))
        .map(Value::from)
        .ok_or_else(|| fail("div: integer divide by zero"))
}

pub(super) fn modulo(a: &[Value]) -> R {
    want(a, "mod", 2)?;
    i(&a[0])
        .checked_rem(i(&a[1]))
        .map(Value::from)
        .ok_or_else(|| fail("mod: integer divide by zero"))
}

pub(super) fn mul(a: &[Value]) -> R {
    want_min(a, "mul", 1)?;
    Ok(a[1..]
        .iter()
        .fold(i(&a[0]), |acc, v| acc.wrapping_mul(i(v)))
        .into())
}

/// Sprig's `execDecimalOp`: `first`, then `op` with each of `rest`, in shopspring's decimals.
fn decimal_op(
    name: &str,
    first: f64,
    rest: impl Iterator<Item = f64>,
    op: fn(&Decimal, &Decimal) -> Option<Decimal>,
) -> R {
    let dec = |x: f64| {
        Decimal::from_f64(x)
            .ok_or_else(|| fail(format!("{name}: cannot create a Decimal from {x}")))
    };
    let mut acc = dec(first)?;
    for x in rest {
        acc =
            op(&acc, &dec(x)?).ok_or_else(|| fail(format!("{name}: decimal division by zero")))?;
    }
    Ok(num_f(acc.to_f64()))
}

fn dec_add(a: &Decimal, b: &Decimal) -> Option<Decimal> {
    Some(a.add(b))
}

fn dec_sub(a: &Decimal, b: &Decimal) -> Option<Decimal> {
    Some(a.sub(b))
}

fn dec_mul(a: &Decimal, b: &Decimal) -> Option<Decimal> {
    Some(a.mul(b))
}

pub(super) fn add1f(a: &[Value]) -> R {
    want(a, "add1f", 1)?;
    decimal_op("add1f", f(&a[0]), std::iter::once(1.0), dec_add)
}

pub(super) fn addf(a: &[Value]) -> R {
    decimal_op("addf", 0.0, a.iter().map(f), dec_add)
}

pub(super) fn subf(a: &[Value]) -> R {
    want_min(a, "subf", 1)?;
    decimal_op("subf", f(&a[0]), a[1..].iter().map(f), dec_sub)
}

pub(super) fn mulf(a: &[Value]) -> R {
    want_min(a, "mulf", 1)?;
    decimal_op("mulf", f(&a[0]), a[1..].iter().map(f), dec_mul)
}

pub(super) fn divf(a: &[Value]) -> R {
    want_min(a, "divf", 1)?;
    decimal_op("divf", f(&a[0]), a[1..].iter().map(f), Decimal::div)
}

pub(super) fn max(a: &[Value]) -> R {
    want_min(a, "max", 1)?;
    Ok(a.iter().map(i).max().unwrap_or(0).into())
}

pub(super) fn min(a: &[Value]) -> R {
    want_min(a, "min", 1)?;
    Ok(a.iter().map(i).min().unwrap_or(0).into())
}

/// Go's `math.Max`: NaN wins, +0 is above -0.
fn go_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        if x.is_sign_negative() { y } else { x }
    } else {
        x.max(y)
    }
}

/// Go's `math.Min`: NaN wins, -0 is below +0.
fn go_min(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        if x.is_sign_negative() { x } else { y }
    } else {
        x.min(y)
    }
}

pub(super) fn maxf(a: &[Value]) -> R {
    want_min(a, "maxf", 1)?;
    Ok(num_f(a[1..].iter().map(f).fold(f(&a[0]), go_max)))
}

pub(super) fn minf(a: &[Value]) -> R {
    want_min(a, "minf", 1)?;
    Ok(num_f(a[1..].iter().map(f).fold(f(&a[0]), go_min)))
}

pub(super) fn ceil(a: &[Value]) -> R {
    want(a, "ceil", 1)?;
    Ok(num_f(f(&a[0]).ceil()))
}

pub(super) fn floor(a: &[Value]) -> R {
    want(a, "floor", 1)?;
    Ok(num_f(f(&a[0]).floor()))
}

/// Sprig's `round`: `Ceil` when the fraction of `x × 10^places` (signed, as `math.Modf` gives
/// it) reaches `roundOn` (0.5), else `Floor`, so -1.4 rounds to -2, as in Sprig.
pub(super) fn round(a: &[Value]) -> R {
    want_min(a, "round", 2)?;
    let x = f(&a[0]);
    let pow = 10f64.powf(i(&a[1]) as f64);
    let round_on = a.get(2).map(f).unwrap_or(0.5);
    let digit = pow * x;
    let r = if digit.fract() >= round_on {
        digit.ceil()
    } else {
        digit.floor()
    };
    Ok(num_f(r / pow))
}
