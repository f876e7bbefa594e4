build-cpu/core/image_io.o: core/image_io.c core/image_io.h core/common.h \
 core/npy.h /usr/include/stb/stb_image.h \
 /usr/include/stb/stb_image_write.h
core/image_io.h:
core/common.h:
core/npy.h:
/usr/include/stb/stb_image.h:
/usr/include/stb/stb_image_write.h:
