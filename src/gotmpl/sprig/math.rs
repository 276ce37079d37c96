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

/// Go's `/` on int64: truncated, division by zero panics (the call's error), and MinInt64 / -1
/// wraps to MinInt64 (the Go spec: "the quotient q = x / y is equal to x" there).
pub(super) fn div(a: &[Value]) -> R {
    want(a, "div", 2)?;
    let (x, y) = (i(&a[0]), i(&a[1]));
    if y == 0 {
        return Err(fail("runtime error: integer divide by zero"));
    }
    Ok(x.wrapping_div(y).into())
}

/// Go's `%` on int64: the sign of the dividend, division by zero panics, MinInt64 % -1 is 0.
pub(super) fn modulo(a: &[Value]) -> R {
    want(a, "mod", 2)?;
    let (x, y) = (i(&a[0]), i(&a[1]));
    if y == 0 {
        return Err(fail("runtime error: integer divide by zero"));
    }
    Ok(x.wrapping_rem(y).into())
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
        acc = op(&acc, &dec(x)?).ok_or_else(|| fail("decimal division by 0"))?; // shopspring's panic
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
/// Sprig's `round(a interface{}, p int, rOpt ...float64)`: `pow := math.Pow(10, p)`, the
/// digit `pow * a` rounded up when its fraction (`math.Modf`'s, of the sign of the digit)
/// reaches `rOpt[0]` (0.5 without one), down otherwise, and divided by `pow` again. Go's
/// `math.Pow` (`go_pow`), not the platform's: `round 1000 91` is 1000 in Go, where a correctly
/// rounded 1e91 gives 999.9999999999999.
pub(super) fn round(a: &[Value]) -> R {
    want_min(a, "round", 2)?;
    let x = f(&a[0]);
    let pow = go_pow(10.0, i(&a[1]) as f64);
    let round_on = a.get(2).map(f).unwrap_or(0.5);
    let digit = pow * x;
    // Go's Modf: the fraction of an infinity is NaN, which no threshold reaches.
    let fraction = if digit.is_infinite() {
        f64::NAN
    } else {
        digit.fract()
    };
    let r = if fraction >= round_on {
        digit.ceil()
    } else {
        digit.floor()
    };
    Ok(num_f(r / pow))
}

/// Go's `math.Pow` (src/math/pow.go) for what `round` asks of it, a whole exponent: the
/// successive squarings of `x`'s mantissa, with the powers of two kept apart and applied last
/// by `Ldexp`. Its result differs from a correctly rounded power in the last bit for many
/// exponents (10^23, 10^30, 10^91), and `round` shows it.
pub(crate) fn go_pow(x: f64, y: f64) -> f64 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if y == 1.0 {
        return x;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    if x == 0.0 || y.is_infinite() || x.is_infinite() || y.fract() != 0.0 {
        // Not reached by `round` (x is 10, y whole and finite); the platform's agrees with
        // Go's special cases there.
        return x.powf(y);
    }
    let yi = y.abs();
    if yi >= 9_223_372_036_854_775_808.0 {
        return if x == -1.0 {
            1.0
        } else if (x.abs() < 1.0) == (y > 0.0) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let mut a1 = 1.0f64;
    let mut ae: i64 = 0;
    let (mut x1, mut xe) = frexp(x);
    let mut i = yi as i64;
    while i != 0 {
        if !(-(1 << 12)..=(1 << 12)).contains(&xe) {
            // xe would overflow the shift: the result under- or overflows anyway.
            ae += xe;
            break;
        }
        if i & 1 == 1 {
            a1 *= x1;
            ae += xe;
        }
        x1 *= x1;
        xe <<= 1;
        if x1 < 0.5 {
            x1 += x1;
            xe -= 1;
        }
        i >>= 1;
    }
    if y < 0.0 {
        a1 = 1.0 / a1;
        ae = -ae;
    }
    ldexp(a1, ae)
}

/// Go's `math.Frexp`: `f = frac × 2^exp`, `frac` in [½, 1).
fn frexp(f: f64) -> (f64, i64) {
    if f == 0.0 || f.is_infinite() || f.is_nan() {
        return (f, 0);
    }
    let (f, mut exp) = normalize(f);
    let mut x = f.to_bits();
    exp += ((x >> 52) & 0x7ff) as i64 - 1022;
    x &= !(0x7ff << 52);
    x |= 1022 << 52;
    (f64::from_bits(x), exp)
}

/// Go's `math.normalize`: a subnormal scaled into the normal range.
fn normalize(x: f64) -> (f64, i64) {
    const SMALLEST_NORMAL: f64 = 2.2250738585072014e-308;
    if x.abs() < SMALLEST_NORMAL {
        return (x * (1u64 << 52) as f64, -52);
    }
    (x, 0)
}

/// Go's `math.Ldexp`: `frac × 2^exp`, rounded once where the result is subnormal.
fn ldexp(frac: f64, exp: i64) -> f64 {
    if frac == 0.0 || frac.is_infinite() || frac.is_nan() {
        return frac;
    }
    let (frac, e) = normalize(frac);
    let mut exp = exp + e;
    let mut x = frac.to_bits();
    exp += ((x >> 52) & 0x7ff) as i64 - 1023;
    if exp < -1075 {
        return 0.0f64.copysign(frac);
    }
    if exp > 1023 {
        return if frac < 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    let mut m = 1.0;
    if exp < -1022 {
        exp += 53;
        m = 1.0 / (1u64 << 53) as f64;
    }
    x &= !(0x7ff << 52);
    x |= ((exp + 1023) as u64) << 52;
    m * f64::from_bits(x)
}
