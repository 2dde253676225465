# cmake -DOUT=<file> -DROOT=<dir> -DLIST=<file listing inputs, one per line> -P concat_files.cmake
# Concatenates the inputs into OUT, each preceded by a "# file: <path relative to ROOT>" line and
# followed by a blank line. Used to build the 'quickstart' corpus (src/titan/data/builtin_datasets.h).
file(STRINGS "${LIST}" files)
set(text "")
foreach(f IN LISTS files)
  file(READ "${f}" content)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  string(APPEND text "# file: ${rel}\n${content}\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
file(RENAME "${OUT}.tmp" "${OUT}")
