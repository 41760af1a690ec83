"""bnstudy.measures.teacher_student."""
