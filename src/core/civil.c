/* Calendar arithmetic after Howard Hinnant's public-domain date algorithms
 * (written here from their description): eras of 400 years, March-based
 * years so that the leap day comes last. */
#include "core/civil.h"

int tk__days_in_month(int year, int month) {
  static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : days[month - 1];
}

int64_t tk__days_from_civil(int year, int month, int day) {
  int64_t y = year - (month <= 2);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void tk__civil_from_days(int64_t days, int *year, int *month, int *day) {
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  *year = (int)(yoe + era * 400 + (m <= 2));
  *month = (int)m;
  *day = (int)(doy - (153 * mp + 2) / 5 + 1);
}

int tk__year_of_ms(int64_t ms) {
  int y, m, d;
  tk__civil_from_days((ms >= 0 ? ms : ms - 86399999) / 86400000, &y, &m, &d);
  return y;
}
