//! The decimal arithmetic of Sprig's `addf`, `add1f`, `subf`, `mulf` and `divf`
//! (shopspring/decimal): each argument becomes the shortest decimal that reads back as the
//! same float (`NewFromFloat`), the operation is exact (division rounds half away from zero
//! at 16 decimal places, shopspring's `DivisionPrecision`), and the result is the float
//! nearest to it. So `addf 0.1 0.2` is 0.3 and `divf 2 3` is 0.6666666666666667, as in NFD.

use num_bigint::BigInt;

/// `mantissa × 10^exponent`.
#[derive(Clone, Debug)]
pub struct Decimal {
    mantissa: BigInt,
    exponent: i64,
}

/// shopspring's `DivisionPrecision`.
const DIVISION_PRECISION: i64 = 16;

fn pow10(n: i64) -> BigInt {
    BigInt::from(10u8).pow(u32::try_from(n).unwrap_or(0))
}

impl Decimal {
    /// `NewFromFloat`: none for NaN and the infinities (shopspring panics; the template fails).
    pub fn from_f64(x: f64) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        if x == 0.0 {
            return Some(Decimal {
                mantissa: BigInt::from(0u8),
                exponent: 0,
            });
        }
        // Rust's `{:e}` writes the shortest digits that read back as `x`, as Go's
        // strconv does for NewFromFloat: `d.ddde±x`.
        let text = format!("{x:e}");
        let (digits, exp) = text.split_once('e')?;
        let exp: i64 = exp.parse().ok()?;
        let (int_part, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let mantissa: BigInt = format!("{int_part}{frac}").parse().ok()?;
        Some(Decimal {
            mantissa,
            exponent: exp - frac.len() as i64,
        })
    }

    /// The float nearest to the exact value (`Rat.Float64`; Rust's parser rounds correctly).
    pub fn to_f64(&self) -> f64 {
        format!("{}e{}", self.mantissa, self.exponent)
            .parse()
            .unwrap_or(f64::NAN)
    }

    /// Both mantissas at the smaller exponent.
    fn aligned(&self, other: &Decimal) -> (BigInt, BigInt, i64) {
        let exp = self.exponent.min(other.exponent);
        (
            &self.mantissa * pow10(self.exponent - exp),
            &other.mantissa * pow10(other.exponent - exp),
            exp,
        )
    }

    pub fn add(&self, other: &Decimal) -> Decimal {
        let (a, b, exponent) = self.aligned(other);
        Decimal {
            mantissa: a + b,
            exponent,
        }
    }

    pub fn sub(&self, other: &Decimal) -> Decimal {
        let (a, b, exponent) = self.aligned(other);
        Decimal {
            mantissa: a - b,
            exponent,
        }
    }

    pub fn mul(&self, other: &Decimal) -> Decimal {
        Decimal {
            mantissa: &self.mantissa * &other.mantissa,
            exponent: self.exponent + other.exponent,
        }
    }

    /// `DivRound(other, 16)`: none when dividing by zero (shopspring panics).
    pub fn div(&self, other: &Decimal) -> Option<Decimal> {
        let zero = BigInt::from(0u8);
        if other.mantissa == zero {
            return None;
        }
        // q × 10^-16 ≈ self / other, q = ma × 10^(ea - eb + 16) / mb.
        let k = self.exponent - other.exponent + DIVISION_PRECISION;
        let (num, den) = if k >= 0 {
            (&self.mantissa * pow10(k), other.mantissa.clone())
        } else {
            (self.mantissa.clone(), &other.mantissa * pow10(-k))
        };
        let mut q = &num / &den;
        let r = &num - &q * &den;
        let abs = |x: &BigInt| if *x < zero { -x } else { x.clone() };
        if abs(&r) * 2u8 >= abs(&den) {
            if (num < zero) != (den < zero) {
                q -= 1u8;
            } else {
                q += 1u8;
            }
        }
        Some(Decimal {
            mantissa: q,
            exponent: -DIVISION_PRECISION,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(a: f64, b: f64, f: fn(&Decimal, &Decimal) -> Option<Decimal>) -> Option<f64> {
        f(&Decimal::from_f64(a)?, &Decimal::from_f64(b)?).map(|d| d.to_f64())
    }

    /// shopspring's results, as Sprig's numeric tests and NewFromFloat's documentation give
    /// them, where float64 arithmetic differs.
    #[test]
    fn computes_as_shopspring_decimal_does() {
        let add = |a: &Decimal, b: &Decimal| Some(a.add(b));
        let sub = |a: &Decimal, b: &Decimal| Some(a.sub(b));
        let mul = |a: &Decimal, b: &Decimal| Some(a.mul(b));
        assert_eq!(op(0.1, 0.2, add), Some(0.3));
        assert_eq!(op(1.1, 2.2, add), Some(3.3));
        assert_eq!(op(1e300, 1e-300, add), Some(1e300));
        assert_eq!(op(0.3, 0.1, sub), Some(0.2));
        assert_eq!(op(1.1, 1.1, mul), Some(1.21));
        assert_eq!(op(1e200, 1e200, mul), Some(f64::INFINITY));
        assert_eq!(op(2.0, 3.0, Decimal::div), Some(0.6666666666666667));
        assert_eq!(op(1.0, 3.0, Decimal::div), Some(0.3333333333333333));
        assert_eq!(op(-2.0, 3.0, Decimal::div), Some(-0.6666666666666667));
        assert_eq!(op(81920.0, 1024.0, Decimal::div), Some(80.0));
        assert_eq!(op(1.0, 0.0, Decimal::div), None);
        // Below 10^-16 a quotient rounds to 0 or 1e-16.
        assert_eq!(op(1.0, 3e16, Decimal::div), Some(0.0));
        assert_eq!(op(2.0, 3e16, Decimal::div), Some(1e-16));
        assert!(Decimal::from_f64(f64::NAN).is_none());
        assert_eq!(
            Decimal::from_f64(123.123123123123).unwrap().to_f64(),
            123.123123123123
        );
    }
}
