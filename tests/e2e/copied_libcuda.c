// Stands for a `cp -L` copy of a real libcuda (process_view.py, case "copied"): installed as a regular file named
// libcuda.so.1, whose name carries no version. Its .rodata holds the strings a real one holds around its version:
// libcuda.so.580.159.04 on the 1xH200 node has "580.159.04" NUL-terminated once after " MIG %uc.%ug.%llugb", and
// the versions of older releases twice each (docs/device-runs/2026-12-03-h200x1-process-view/summary.txt), so
// only the highest is its own. This copy's own is 535.104.05.
__attribute__((used)) const char gpudx_copied_libcuda_strings[] =
    "rintfBufLen\0 MIG %ug.%llugb\0 MIG %uc.%ug.%llugb\0"
    "535.104.05\0"
    "470.57.02\0" "470.57.02\0" "525.60.13\0" "525.60.13\0"
    "-a\0channel%d\0" "9.0\0" "10.0\0";
