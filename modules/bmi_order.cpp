// Intentionally empty. modules/meson.build compiles it into one small library per module unit,
// ordered after that unit's BMI, for importers to depend on (see the comment there).
